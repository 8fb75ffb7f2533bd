"""The gate's score for one query and many candidates, built to be cheap.

``MemGate``'s first layer splits as ``W_q q + W_v v + W_qv (q * v) + b``. ``FusedGateScorer``
takes the memory part ``W_v v`` precomputed once per memory (``MemGate.precompute_memory``, at
write time), computes ``W_q q + b`` once per query and leaves the ``q * v`` term and the
remaining layers per candidate, in a dozen large tensor operations. ``MemGate.forward`` spends
much of its time at two threads in the overhead of its many small operations (each one an
OpenMP region), not in arithmetic: this scorer computes the same function (checked against
``MemGate.score`` in ``tests/model/test_gate_scoring.py``, also against the released gate on real
embeddings) faster: one matrix product per layer, no autograd context (weights and inputs are
detached), no module-call hooks, no copies of inputs already in the gate's dtype. For the
released 2x256 gate and 100 real candidates: 1.08-1.37 ms per query, 0.64-0.68 ms per query with 8
queries per call at 2 threads (``benchmarks/bench_gate.py``, docs/integrations/scale.md).

``OnnxGateScorer`` runs the same function as one float32 ONNX Runtime graph (``gate_graph``: one
node per operation of ``FusedGateScorer._score``, the weights as constants; kept per gate by
``cached_gate_graph``, since building imports onnx): one call into a thread pool that scales to two threads where torch's dozen OpenMP
regions do not. At the default depth (200 candidates) it is what the retriever runs when
onnxruntime is installed (``fast_gate_scorer``); docs/benchmarks.md has every lever measured side
by side (oneDNN, TorchScript, ``torch.compile``, threads).

**Score and risk** (the retriever's ``gate_risk``): every scorer's ``score`` returns what the gate
ranks by (the masked cosine ``S``, or ``S' = S - a sigmoid(r)`` for ``score_form: mask_risk``), and
``score_with_risk(q, V, v_part)`` returns a :class:`GateScores` ``(score, risk)`` whose ``risk`` is
``sigmoid(r)`` per candidate (the risk head reads the first hidden layer, so it comes out of the
same pass) or ``None`` when the gate has no risk head. ``OnnxGateScorer(gate, memory_fp16=True)``
keeps the memory part in float16 (half the bytes per memory; the graph casts it back).

It lives beside the gate (not in the retriever) because the evaluation routes, the training guard
and the retriever all score with it. The scorer copies the gate's weights when it is built (as the retriever's precomputed memory
parts do); rebuild it after changing the gate. Eval mode only: dropout is the identity.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, Optional

import numpy as np
import torch

from memgate.model.gate import GateScores, MemGate
from memgate.model.ordering import rank_by_score  # re-exported: the eval routes order with it


class FusedGateScorer:
    """``score(q, V, v_part) == MemGate.score(q, V)`` for ``v_part = gate.precompute_memory(V)``;
    ``score_with_risk`` adds sigmoid(r) per candidate (None without a risk head)."""

    def __init__(self, gate: MemGate):
        if not isinstance(gate, MemGate):
            raise TypeError(f"gate must be a MemGate, got {type(gate).__name__}")
        cfg = gate.config
        self.config = cfg
        self.eps = cfg.eps
        first = gate.first_layer
        W = first.weight.detach()
        d = cfg.dim
        blocks = {
            "qv_prod": {"q": W[:, :d], "qv": W[:, 2 * d :]},
            "no_prod": {"q": W[:, :d]},
            "v_only": {},
            "q_only": {"q": W},
            "prod_only": {"qv": W},
        }[cfg.features]
        self.W_q = None if "q" not in blocks else blocks["q"].contiguous().clone()
        self.W_qv_t = None if "qv" not in blocks else blocks["qv"].t().contiguous().clone()
        self.b0 = first.bias.detach().clone()
        self.hidden = [(layer.weight.detach().t().contiguous().clone(), layer.bias.detach().clone())
                       for layer in gate.hidden_layers]
        self.head = (gate.head.weight.detach().t().contiguous().clone(), gate.head.bias.detach().clone())
        # mask_risk: r = w_r . h1 + b_r on the first hidden layer, a the scale of sigmoid(r)
        self.risk: Optional[tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = None
        if gate.risk_head is not None:
            self.risk = (gate.risk_head.weight.detach()[0].contiguous().clone(),
                         gate.risk_head.bias.detach().clone(), gate.risk_scale().detach().clone())
        self.act: Callable[[torch.Tensor], torch.Tensor] = gate.act.forward  # no module-call hooks
        self._gate = gate

    def memory_part(self, V: Any) -> torch.Tensor:
        """``W_v v`` for each row of V (what the retriever stores per memory; from the gate's
        current weights, like ``MemGate.precompute_memory``)."""
        with torch.no_grad():
            return self._gate.precompute_memory(V)

    def _tensor(self, x: Any) -> torch.Tensor:
        """Arrays and tensors on the gate's device and dtype (no copy when they already are)."""
        t: torch.Tensor = x if isinstance(x, torch.Tensor) else torch.from_numpy(np.asarray(x))
        if t.dtype == self.b0.dtype and t.device == self.b0.device:
            return t
        return t.to(device=self.b0.device, dtype=self.b0.dtype)

    def _check(self, q: torch.Tensor, V: torch.Tensor, v_part: torch.Tensor) -> None:
        d, batched = self.config.dim, q.ndim == 2
        if q.ndim != V.ndim - 1 or q.ndim not in (1, 2) or q.shape[-1] != d or V.shape[-1] != d \
                or (batched and V.shape[0] != q.shape[0]):
            raise ValueError(f"expected q ({d},) and V (N, {d}), or q (B, {d}) and V (B, N, {d}), "
                             f"got {tuple(q.shape)} and {tuple(V.shape)}")
        if tuple(v_part.shape) != (*V.shape[:-1], self.config.hidden):
            raise ValueError(f"v_part has shape {tuple(v_part.shape)}, expected "
                             f"{(*V.shape[:-1], self.config.hidden)}")

    def score(self, q: Any, V: Any, v_part: Any) -> torch.Tensor:
        """The gate's score of one query ``q`` (d,) against ``V`` (N, d), given ``v_part`` (N,
        hidden); or of ``B`` queries at once: ``q`` (B, d), ``V`` (B, N, d), ``v_part`` (B, N, hidden)
        -> (B, N), the same scores as B single calls in one pass of batched matrix products."""
        return self.score_with_risk(q, V, v_part).score

    def score_with_risk(self, q: Any, V: Any, v_part: Any) -> GateScores:
        """``score`` and sigmoid(r) of every candidate (risk None without a risk head)."""
        q, V, v_part = self._tensor(q), self._tensor(V), self._tensor(v_part)
        self._check(q, V, v_part)
        # the weights are detached copies, so with detached inputs autograd records nothing: no
        # no_grad / inference_mode context to enter (tens of microseconds per call on 2 cores)
        return self._score(q.detach(), V.detach(), v_part.detach())

    def _score(self, q: torch.Tensor, V: torch.Tensor, v_part: torch.Tensor) -> GateScores:
        eps, batched = self.eps, q.ndim == 2
        q = q / torch.linalg.vector_norm(q, dim=-1, keepdim=True).clamp_min_(eps)
        V = V / torch.linalg.vector_norm(V, dim=-1, keepdim=True).clamp_min_(eps)
        d = V.shape[-1]
        if self.W_q is None:
            h = v_part + self.b0
        elif batched:
            h = v_part + torch.addmm(self.b0, q, self.W_q.t()).unsqueeze(-2)
        else:
            h = v_part + torch.addmv(self.b0, self.W_q, q)
        if self.W_qv_t is not None:  # one (B N, d) x (d, hidden) product for every query at once
            qv = (V * q.unsqueeze(-2)) if batched else V * q
            h = torch.addmm(h.reshape(-1, h.shape[-1]), qv.reshape(-1, d), self.W_qv_t)
        h = self.act(h.reshape(-1, h.shape[-1]))
        risk_logit = None if self.risk is None else torch.addmv(self.risk[1], h, self.risk[0])
        for W_t, b in self.hidden:
            h = self.act(torch.addmm(b, h, W_t))
        logits = torch.addmm(self.head[1], h, self.head[0])  # (B N, d) or (B N, 1)
        if self.config.center_mask:
            logits = logits - logits.mean(dim=-1, keepdim=True) + self.config.init_bias
        g = logits.sigmoid_()
        if self.config.mask_kind == "binary":
            g = (g > 0.5).to(g.dtype)
        g = g.view(*V.shape[:-1], g.shape[-1])
        Vg = g.mul_(V) if g.shape == V.shape else V * g
        num = torch.matmul(Vg, q.unsqueeze(-1)).squeeze(-1) if batched else torch.mv(Vg, q)
        score = num.div_(torch.linalg.vector_norm(Vg, dim=-1).clamp_min_(eps))
        if risk_logit is None or self.risk is None:
            return GateScores(score, None)
        risk = risk_logit.sigmoid_().view(V.shape[:-1])
        return GateScores(score - self.risk[2] * risk, risk)


# ----------------------------------------------------------------------------- ONNX Runtime


def gate_graph(fused: FusedGateScorer, memory_fp16: bool = False) -> bytes:
    """``fused``'s score for one query ``q`` (d,) and N candidates ``V`` (N, d) with their memory
    parts ``v_part`` (N, hidden), as a serialized float32 ONNX graph (opset 20) whose constants are
    the scorer's weights: the operations of ``FusedGateScorer._score``, one node each. Outputs
    ``score`` (N,) and, for a gate with a risk head, ``risk`` = sigmoid(r) (N,). ``memory_fp16``:
    ``v_part`` is a float16 input, cast to float32 first."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    nodes: list[Any] = []
    consts: dict[str, Any] = {}

    def const(name: str, value: Any) -> str:
        consts[name] = numpy_helper.from_array(np.asarray(value), name)
        return name

    def op(kind: str, inputs: list[str], out: str, **attrs: Any) -> str:
        nodes.append(helper.make_node(kind, inputs, [out], **attrs))
        return out

    def act(x: str, out: str) -> str:
        kind = fused.config.activation
        if kind == "gelu":
            return op("Gelu", [x], out, approximate="none")
        if kind == "silu":
            return op("Mul", [x, op("Sigmoid", [x], out + "_sig")], out)
        return op({"relu": "Relu", "tanh": "Tanh"}[kind], [x], out)

    def w(t: torch.Tensor) -> np.ndarray:
        return t.detach().cpu().numpy().astype(np.float32)

    eps, last = const("eps", np.float32(fused.eps)), const("last_axis", np.array([-1], dtype=np.int64))
    qn = op("Div", ["q", op("Max", [op("ReduceL2", ["q", last], "q_norm", keepdims=1), eps], "q_norm_c")], "qn")
    Vn = op("Div", ["V", op("Max", [op("ReduceL2", ["V", last], "V_norm", keepdims=1), eps], "V_norm_c")], "Vn")
    v_part = op("Cast", ["v_part"], "v_part_f32", to=TensorProto.FLOAT) if memory_fp16 else "v_part"
    if fused.W_q is None:
        h = op("Add", [v_part, const("b0", w(fused.b0))], "h0")
    else:
        q_part = op("Add", [op("MatMul", [const("W_q", w(fused.W_q)), qn], "Wq_q"), const("b0", w(fused.b0))], "q_part")
        h = op("Add", [v_part, q_part], "h0")
    if fused.W_qv_t is not None:
        h = op("Add", [h, op("MatMul", [op("Mul", [Vn, qn], "qv"), const("W_qv", w(fused.W_qv_t))], "qv_W")], "h0_qv")
    h = act(h, "a0")
    risk, risk_params = None, fused.risk
    if risk_params is not None:  # r = w_r . a0 + b_r on the first hidden layer
        r = op("Add", [op("MatMul", [h, const("W_risk", w(risk_params[0]))], "m_risk"), const("b_risk", w(risk_params[1]))], "risk_logit")
        risk = op("Sigmoid", [r], "risk")
    for i, (W_t, b) in enumerate(fused.hidden, start=1):
        h = act(op("Add", [op("MatMul", [h, const(f"W{i}", w(W_t))], f"m{i}"), const(f"b{i}", w(b))], f"h{i}"), f"a{i}")
    logits = op("Add", [op("MatMul", [h, const("W_head", w(fused.head[0]))], "m_head"), const("b_head", w(fused.head[1]))], "logits")
    if fused.config.center_mask:
        mean = op("ReduceMean", [logits, last], "logits_mean", keepdims=1)
        logits = op("Add", [op("Sub", [logits, mean], "logits_dev"), const("b_center", np.float32(fused.config.init_bias))], "logits_c")
    g = op("Sigmoid", [logits], "g")
    if fused.config.mask_kind == "binary":
        g = op("Cast", [op("Greater", [g, const("half", np.float32(0.5))], "g_on")], "g_bin", to=TensorProto.FLOAT)
    Vg = op("Mul", [g, Vn], "Vg")
    num = op("MatMul", [Vg, qn], "num")
    den = op("Max", [op("ReduceL2", [Vg, last], "Vg_norm", keepdims=0), eps], "Vg_norm_c")
    if risk is None or risk_params is None:
        op("Div", [num, den], "score")
    else:  # S' = S - a sigmoid(r)
        op("Sub", [op("Div", [num, den], "masked"), op("Mul", [risk, const("risk_scale", w(risk_params[2]))], "risk_term")], "score")
    d, hidden = fused.config.dim, fused.config.hidden
    outputs = [helper.make_tensor_value_info("score", TensorProto.FLOAT, ["n"])]
    if risk is not None:
        outputs.append(helper.make_tensor_value_info("risk", TensorProto.FLOAT, ["n"]))
    memory_type = TensorProto.FLOAT16 if memory_fp16 else TensorProto.FLOAT
    graph = helper.make_graph(
        nodes, "memgate_gate_score",
        [helper.make_tensor_value_info("q", TensorProto.FLOAT, [d]),
         helper.make_tensor_value_info("V", TensorProto.FLOAT, ["n", d]),
         helper.make_tensor_value_info("v_part", memory_type, ["n", hidden])],
        outputs, initializer=list(consts.values()))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)], producer_name="memgate")
    model.ir_version = 9
    onnx.checker.check_model(model)
    serialized: bytes = model.SerializeToString()
    return serialized


GRAPH_FORMAT = "memgate-gate-graph/2"  # bump when gate_graph changes what it writes (2: risk, centring, fp16)


def graph_dir() -> Path:
    """Where built gate graphs are kept (``$MEMGATE_GATE_CACHE``, else the user cache)."""
    if os.environ.get("MEMGATE_GATE_CACHE"):
        return Path(os.environ["MEMGATE_GATE_CACHE"]).expanduser()
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "memgate" / "gates"


def graph_key(fused: FusedGateScorer, memory_fp16: bool = False) -> str:
    """A name for this scorer's graph: the graph format, the architecture, the memory part's
    dtype and every weight."""
    digest = hashlib.sha256(GRAPH_FORMAT.encode())
    digest.update(json.dumps({**fused.config.to_dict(), "memory_fp16": memory_fp16}, sort_keys=True).encode())
    risk = fused.risk or ()
    for t in (fused.W_q, fused.W_qv_t, fused.b0, *(x for pair in fused.hidden for x in pair), *fused.head, *risk):
        if t is not None:
            digest.update(t.detach().cpu().numpy().tobytes())
    return digest.hexdigest()[:24]


def cached_gate_graph(fused: FusedGateScorer, rebuild: bool = False, memory_fp16: bool = False) -> tuple[bytes, bool]:
    """``(gate_graph(fused, memory_fp16), from_cache)``: building imports onnx (about half a
    second), so a built graph is kept in ``graph_dir()`` by ``graph_key`` and read back by later
    processes (``rebuild`` replaces the kept one; an unwritable cache only costs the rebuild)."""
    path = graph_dir() / f"{graph_key(fused, memory_fp16)}.onnx"
    if path.is_file() and not rebuild:
        return path.read_bytes(), True
    graph = gate_graph(fused, memory_fp16)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path.parent, suffix=".tmp", delete=False) as f:
            f.write(graph)
        os.replace(f.name, path)
    except OSError:
        pass
    return graph, False


class OnnxGateScorer:
    """``score(q, V, v_part)`` / ``score_with_risk`` of ``FusedGateScorer`` for a float32 CPU gate,
    in ONNX Runtime.

    The graph comes from ``cached_gate_graph``; whatever its source, the session is checked
    against the torch scorer on seeded probe vectors before it is used (a graph that disagrees,
    e.g. a damaged cache file, is rebuilt; if the rebuilt one disagrees too, construction fails).
    ``memory_fp16``: ``memory_part`` returns float16 (half the bytes per memory) and ``score``
    takes it; the graph casts it back, so the scores are the torch scorer's on the rounded part."""

    def __init__(self, gate: MemGate, threads: Optional[int] = None, *, memory_fp16: bool = False):
        if not isinstance(gate, MemGate):
            raise TypeError(f"gate must be a MemGate, got {type(gate).__name__}")
        if gate.head.weight.dtype != torch.float32 or gate.head.weight.device.type != "cpu":
            raise ValueError("OnnxGateScorer scores float32 gates on the CPU (use FusedGateScorer)")
        self.fused = FusedGateScorer(gate)
        self.config = gate.config
        self.memory_fp16 = bool(memory_fp16)
        self._memory_dtype = np.float16 if self.memory_fp16 else np.float32
        self._outputs = ["score", "risk"] if self.fused.risk is not None else ["score"]
        self.threads = threads if threads is not None else int(os.environ.get("MEMGATE_GATE_THREADS", "0") or 0)
        graph, cached = cached_gate_graph(self.fused, memory_fp16=self.memory_fp16)
        try:
            self.session = self._session(graph)
            ok = self._agrees()
        except Exception:  # noqa: BLE001 - a damaged cache file: rebuilt below
            if not cached:
                raise
            ok = False
        if not ok and cached:
            self.session = self._session(cached_gate_graph(self.fused, rebuild=True, memory_fp16=self.memory_fp16)[0])
            ok = self._agrees()
        if not ok:
            raise RuntimeError("the gate's ONNX Runtime graph disagrees with FusedGateScorer on probe vectors")

    def _session(self, graph: bytes) -> Any:
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.intra_op_num_threads = self.threads  # 0: one per physical core
        options.inter_op_num_threads = 1
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        return ort.InferenceSession(graph, options, providers=["CPUExecutionProvider"])

    def _agrees(self, n: int = 8) -> bool:
        rng = np.random.default_rng(0)
        q = rng.standard_normal(self.config.dim).astype(np.float32)
        V = rng.standard_normal((n, self.config.dim)).astype(np.float32)
        v_part = self.memory_part(V).numpy()
        got = self.session.run(self._outputs, {"q": q, "V": V, "v_part": v_part})
        ref = self.fused.score_with_risk(q, V, v_part.astype(np.float32))
        ok = bool(np.abs(got[0] - ref.score.numpy()).max() <= 1e-5)
        if ref.risk is not None:
            ok = ok and len(got) == 2 and bool(np.abs(got[1] - ref.risk.numpy()).max() <= 1e-5)
        return ok

    def memory_part(self, V: Any) -> torch.Tensor:
        """``W_v v`` per row of V: float32, or float16 with ``memory_fp16``."""
        part = self.fused.memory_part(V)
        return part.half() if self.memory_fp16 else part

    def score(self, q: Any, V: Any, v_part: Any) -> torch.Tensor:
        """The gate's score of ``q`` (d,) against ``V`` (N, d) given ``v_part`` (N, hidden) -> (N,);
        a batch (``q`` (B, d)) is scored by the torch scorer. Arrays or CPU tensors; float32 inputs
        are not copied."""
        return self.score_with_risk(q, V, v_part).score

    def score_with_risk(self, q: Any, V: Any, v_part: Any) -> GateScores:
        """``score`` and sigmoid(r) per candidate (risk None without a risk head), one graph run."""
        q, V, v_part = _array(q), _array(V), _array(v_part, self._memory_dtype)
        if q.ndim == 2:
            return self.fused.score_with_risk(q, V, v_part)
        d, hidden = self.config.dim, self.config.hidden
        if q.shape != (d,) or V.ndim != 2 or V.shape[1] != d:
            raise ValueError(f"expected q ({d},) and V (N, {d}), or q (B, {d}) and V (B, N, {d}), "
                             f"got {q.shape} and {V.shape}")
        if v_part.shape != (V.shape[0], hidden):
            raise ValueError(f"v_part has shape {v_part.shape}, expected {(V.shape[0], hidden)}")
        if V.shape[0] == 0:
            empty = torch.zeros(0, dtype=torch.float32)
            return GateScores(empty, None if self.fused.risk is None else empty.clone())
        got = self.session.run(self._outputs, {"q": q, "V": V, "v_part": v_part})
        return GateScores(torch.from_numpy(got[0]), torch.from_numpy(got[1]) if len(got) > 1 else None)


def _array(x: Any, dtype: Any = np.float32) -> np.ndarray:
    """A C-contiguous array of ``x`` in ``dtype`` (a view when it is one already)."""
    if isinstance(x, torch.Tensor):
        x = x.detach().cpu()
        x = (x.float() if x.dtype == torch.bfloat16 else x).numpy()
    return np.ascontiguousarray(x, dtype=dtype)


FastGateScorer = FusedGateScorer | OnnxGateScorer  # what fast_gate_scorer returns


def fast_gate_scorer(gate: MemGate, threads: Optional[int] = None) -> FastGateScorer:
    """The retriever's scorer: ``OnnxGateScorer`` when onnxruntime is installed and the gate is a
    float32 CPU gate, else ``FusedGateScorer`` (the same scores). Both give ``score(q, V,
    v_part)`` and ``score_with_risk(q, V, v_part)`` (:class:`GateScores`: the score and
    sigmoid(r) per candidate, risk None when the gate has no risk head)."""
    float_cpu = gate.head.weight.dtype == torch.float32 and gate.head.weight.device.type == "cpu"
    if float_cpu and importlib.util.find_spec("onnxruntime") is not None \
            and os.environ.get("MEMGATE_GATE_BACKEND", "auto") != "torch":
        return OnnxGateScorer(gate, threads)
    return FusedGateScorer(gate)


__all__ = ["FastGateScorer", "FusedGateScorer", "GateScores", "OnnxGateScorer", "cached_gate_graph", "fast_gate_scorer",
           "gate_graph", "graph_key", "rank_by_score"]
