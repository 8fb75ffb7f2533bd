"""The training objective: one gate forward pass, the chosen preference loss, the preservation
penalty, the ranking preservation on benign lists, the risk head's calibration loss (score form
``mask_risk``) and the diagnostics (docs/design.md section 4). No trainer imports.

With ``loss.risk_weight > 0`` the risk logit r gets a binary cross-entropy: m- labelled 1, m+ and
the benign-list items 0 (each example weighs its m+ and its mean over real m- equally), so that
sigmoid(r) reads as a probability of risk.

Mask diagnostics (``mask_stats=True``, the validation pass): the **uniform share** of ||1 - g||^2
(d * mean(1 - g)^2 / ||1 - g||^2 pooled over memories: the part of the mask's departure from 1 that
is a uniform scale, which cancels in the cosine) and the **alignment**: per memory, the correlation
over dimensions of 1 - g with c_i = q_i v_i - cos * v_i^2 (unit q, v), the first-order change of
the cosine when dimension i is masked; positive = the gate masks the dimensions that carry the
similarity, so S falls. Logged for m+ and m- separately.

Shapes: q (B, d); v_pos (B, d); v_negs (B, n, d) or (B, d) for one negative per query;
neg_mask optional bool (B, n) with True for real negatives (negative 0 must be real).
Benign lists: q (L, d); items (L, n, d); item_mask optional bool (L, n), True for real items.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from memgate.model.gate import GateOutput, MemGate
from memgate.train.loss import (
    dpo_listwise_loss,
    dpo_pairwise_loss,
    list_kl_loss,
    margin_loss,
    masked_mean,
    preservation_penalty,
)
from memgate.train.loss_config import LOSS_KINDS, LossConfig  # re-exported (torch-free)


def preference_loss(
    cfg: LossConfig,
    gate: MemGate,
    q: torch.Tensor,
    v_pos: torch.Tensor,
    v_negs: torch.Tensor,
    neg_mask: torch.Tensor | None = None,
    mask_stats: bool = False,
) -> tuple[torch.Tensor, dict[str, float]]:
    """Per-example loss (B,) and a dict of detached diagnostics (python floats); ``mask_stats``
    adds the mask diagnostics of the module doc (the validation pass)."""
    if q.ndim != 2 or v_pos.shape != q.shape:
        raise ValueError(
            f"q and v_pos must both have shape (B, d), got {tuple(q.shape)} and "
            f"{tuple(v_pos.shape)}"
        )
    if v_negs.ndim == 2:
        v_negs = v_negs.unsqueeze(1)
    if v_negs.ndim != 3 or v_negs.shape[0] != q.shape[0] or v_negs.shape[2] != q.shape[1]:
        raise ValueError(
            f"v_negs must have shape (B, n, d) = ({q.shape[0]}, n, {q.shape[1]}), "
            f"got {tuple(v_negs.shape)}"
        )
    n = v_negs.shape[1]
    if neg_mask is not None:
        if neg_mask.dtype != torch.bool or neg_mask.shape != (q.shape[0], n):
            raise ValueError(f"neg_mask must be a bool tensor of shape ({q.shape[0]}, {n})")
        if not bool(neg_mask[:, 0].all()):
            raise ValueError("neg_mask: negative 0 of every example must be real")

    out = gate(q, torch.cat([v_pos.unsqueeze(1), v_negs], dim=1))  # (B, 1 + n)
    s_pos, s_negs = out.score[:, 0], out.score[:, 1:]
    r_pos, r_negs = out.reference[:, 0], out.reference[:, 1:]
    g_pos, g_negs = out.mask[:, 0], out.mask[:, 1:]
    s_pos_n, r_pos_n = s_pos.unsqueeze(1).expand_as(s_negs), r_pos.unsqueeze(1).expand_as(r_negs)

    parts: dict[str, torch.Tensor] = {}
    if cfg.kind in ("dpo", "dpo+margin"):
        pair = dpo_pairwise_loss(s_pos_n, r_pos_n, s_negs, r_negs, cfg.beta, cfg.temperature)
        parts["dpo"] = masked_mean(pair.losses, neg_mask)
        chosen, rejected = pair.chosen_rewards[:, 0], pair.rejected_rewards
    if cfg.kind == "listwise":
        lw = dpo_listwise_loss(s_pos, r_pos, s_negs, r_negs, cfg.beta, cfg.temperature, neg_mask)
        parts["listwise"] = lw.losses
        chosen, rejected = lw.chosen_rewards, lw.rejected_rewards
    if cfg.kind in ("margin", "dpo+margin"):
        mg = margin_loss(s_pos_n, s_negs, cfg.temperature)
        weight = cfg.margin_weight if cfg.kind == "dpo+margin" else 1.0
        parts["margin"] = weight * masked_mean(mg.losses, neg_mask)
        if cfg.kind == "margin":  # report the implicit rewards even when the loss ignores them
            chosen = (cfg.beta / cfg.temperature) * (s_pos - r_pos)
            rejected = (cfg.beta / cfg.temperature) * (s_negs - r_negs)
    parts["preservation"] = preservation_penalty(
        g_pos, cfg.preservation_weight, g_negs, cfg.preserve_negatives, neg_mask
    )
    if cfg.risk_weight > 0 and out.risk_logit is not None:
        pos_bce = F.binary_cross_entropy_with_logits(out.risk_logit[:, 0], torch.zeros_like(s_pos), reduction="none")
        neg_bce = F.binary_cross_entropy_with_logits(out.risk_logit[:, 1:], torch.ones_like(s_negs), reduction="none")
        parts["risk_bce"] = cfg.risk_weight * 0.5 * (pos_bce + masked_mean(neg_bce, neg_mask))
    losses = torch.stack(list(parts.values())).sum(0)

    with torch.no_grad():
        diagnostics = _diagnostics(
            s_pos, s_negs, r_pos, r_negs, g_pos, g_negs, v_pos, chosen, rejected, neg_mask
        )
        diagnostics.update({f"loss_{k}": float(v.mean()) for k, v in parts.items()})
        diagnostics["loss"] = float(losses.mean())
        if out.risk_logit is not None:
            diagnostics.update(_risk_diagnostics(gate, out, neg_mask))
        if mask_stats:
            V = torch.cat([v_pos.unsqueeze(1), v_negs], dim=1)
            diagnostics.update(mask_diagnostics(q, V, out.mask, neg_mask))
            diagnostics["activity"] = _masked_all(out.score - out.reference, neg_mask, absolute=True)
    return losses, diagnostics


def list_preservation_loss(
    cfg: LossConfig,
    gate: MemGate,
    q: torch.Tensor,
    items: torch.Tensor,
    item_mask: torch.Tensor | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """Weighted per-list ranking-preservation loss (L,) and its diagnostics.

    ``loss_list_kl`` is the unweighted mean KL (nats); ``list_top1_kept`` the share of lists
    whose top candidate under the gated cosine is the reference's top candidate.
    """
    if q.ndim != 2 or items.ndim != 3 or items.shape[0] != q.shape[0] or items.shape[2] != q.shape[1]:
        raise ValueError(
            f"benign lists: q must be (L, d) and items (L, n, d) with the same L and d, got "
            f"{tuple(q.shape)} and {tuple(items.shape)}"
        )
    out = gate(q, items)  # (L, n)
    kl = list_kl_loss(out.score, out.reference, cfg.list_temperature, item_mask)
    losses = cfg.list_preservation_weight * kl
    with torch.no_grad():
        valid = torch.ones_like(out.score, dtype=torch.bool) if item_mask is None else item_mask
        lowest = torch.finfo(out.score.dtype).min
        top_gated = out.score.masked_fill(~valid, lowest).argmax(dim=-1)
        top_ref = out.reference.masked_fill(~valid, lowest).argmax(dim=-1)
        diagnostics = {"loss_list_kl": float(kl.mean()),
                       "list_top1_kept": float((top_gated == top_ref).float().mean())}
    if cfg.risk_weight > 0 and out.risk_logit is not None:  # benign items: risk label 0
        bce = F.binary_cross_entropy_with_logits(out.risk_logit, torch.zeros_like(out.score), reduction="none")
        list_bce = masked_mean(bce, item_mask)
        losses = losses + cfg.risk_weight * list_bce
        diagnostics["loss_list_risk_bce"] = float(list_bce.detach().mean())
    return losses, diagnostics


def mask_diagnostics(q: torch.Tensor, V: torch.Tensor, g: torch.Tensor,
                     neg_mask: torch.Tensor | None = None) -> dict[str, float]:
    """The uniform share of ||1 - g||^2 and the alignment of 1 - g with q_i v_i - cos v_i^2
    (module doc). q (B, d); V, g (B, 1 + n, d): memory 0 is m+, the rest m- (``neg_mask`` (B, n)
    marks the real ones)."""
    qn = q / q.norm(dim=-1, keepdim=True).clamp_min(1e-8)
    Vn = V / V.norm(dim=-1, keepdim=True).clamp_min(1e-8)
    valid = torch.ones(g.shape[:2], dtype=torch.bool, device=g.device)
    if neg_mask is not None:
        valid[:, 1:] = neg_mask
    u = 1.0 - g
    u_mean = u.mean(dim=-1, keepdim=True)
    total = u.pow(2).sum(dim=-1)[valid].sum()
    uniform = (g.shape[-1] * u_mean.squeeze(-1).pow(2))[valid].sum()
    cos = (qn.unsqueeze(1) * Vn).sum(dim=-1, keepdim=True)
    contribution = qn.unsqueeze(1) * Vn - cos * Vn.pow(2)
    du, dc = u - u_mean, contribution - contribution.mean(dim=-1, keepdim=True)
    corr = (du * dc).sum(dim=-1) / (du.norm(dim=-1) * dc.norm(dim=-1)).clamp_min(1e-12)
    return {"mask_uniform_share": float(uniform / total.clamp_min(1e-30)),
            "mask_alignment_pos": float(corr[:, 0].mean()),
            "mask_alignment_neg": float(corr[:, 1:][valid[:, 1:]].mean())}


def _masked_all(x: torch.Tensor, neg_mask: torch.Tensor | None, absolute: bool = False) -> float:
    """Mean over m+ and every real m- of x (B, 1 + n)."""
    x = x.abs() if absolute else x
    if neg_mask is None:
        return float(x.mean())
    valid = torch.cat([torch.ones_like(neg_mask[:, :1]), neg_mask], dim=1)
    return float(x[valid].mean())


def _risk_diagnostics(gate: MemGate, out: GateOutput, neg_mask: torch.Tensor | None) -> dict[str, float]:
    """Mean sigmoid(r) on m+ and on the real m-, and the scale a."""
    risk = out.risk
    assert risk is not None
    valid = torch.ones_like(risk[:, 1:], dtype=torch.bool) if neg_mask is None else neg_mask
    return {"risk_pos_mean": float(risk[:, 0].mean()), "risk_neg_mean": float(risk[:, 1:][valid].mean()),
            "risk_scale": float(gate.risk_scale().detach())}


def _diagnostics(s_pos, s_negs, r_pos, r_negs, g_pos, g_negs, v_pos, chosen, rejected, neg_mask):
    """Preference accuracy (gated / reference; against every real negative and the first one),
    mean margins, mean masks and the health metric cos(v+, v+ * g+)."""
    valid = torch.ones_like(s_negs, dtype=torch.bool) if neg_mask is None else neg_mask

    def acc_all(sp, sn):
        return float(((sp.unsqueeze(1) > sn) | ~valid).all(dim=1).float().mean())

    def mean_valid(x):
        return float(masked_mean(x, valid).mean())

    v = v_pos / v_pos.norm(dim=-1, keepdim=True).clamp_min(1e-8)
    vg = v * g_pos
    health = (v * vg).sum(-1) / vg.norm(dim=-1).clamp_min(1e-8)
    g_neg_per = g_negs.mean(dim=-1)  # (B, n)
    return {
        "pref_acc_gated": acc_all(s_pos, s_negs),
        "pref_acc_reference": acc_all(r_pos, r_negs),
        "pref_acc_gated_first": float((s_pos > s_negs[:, 0]).float().mean()),
        "pref_acc_reference_first": float((r_pos > r_negs[:, 0]).float().mean()),
        "margin_gated": mean_valid(s_pos.unsqueeze(1) - s_negs),
        "margin_reference": mean_valid(r_pos.unsqueeze(1) - r_negs),
        "reward_chosen": float(chosen.mean()),
        "reward_rejected": mean_valid(rejected),
        "reward_margin": mean_valid(chosen.unsqueeze(1) - rejected),
        "g_pos_mean": float(g_pos.mean()),
        "g_neg_mean": mean_valid(g_neg_per),
        # (a float32 cosine of near-parallel vectors can round past 1; config.json holds it to [-1, 1])
        "cos_v_vg_pos": min(1.0, max(-1.0, float(health.mean()))),
    }


__all__ = ["LOSS_KINDS", "LossConfig", "list_preservation_loss", "mask_diagnostics", "preference_loss"]
