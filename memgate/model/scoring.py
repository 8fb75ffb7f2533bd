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
from pathlib import Path
from typing import Optional

import numpy as np
import torch

from memgate.model.gate import MemGate
from memgate.model.ordering import rank_by_score  # re-exported: the eval routes order with it


class FusedGateScorer:
    """``score(q, V, v_part) == MemGate.score(q, V)`` for ``v_part = gate.precompute_memory(V)``."""

    def __init__(self, gate: MemGate):
        if not isinstance(gate, MemGate):
            raise TypeError(f"gate must be a MemGate, got {type(gate).__name__}")
        cfg = gate.config
        self.config = cfg
        self.eps = cfg.eps
        W = gate.layers[0].weight.detach()
        d = cfg.dim
        blocks = {
            "qv_prod": {"q": W[:, :d], "qv": W[:, 2 * d :]},
            "no_prod": {"q": W[:, :d]},
            "v_only": {},
            "q_only": {"q": W},
        }[cfg.features]
        self.W_q = None if "q" not in blocks else blocks["q"].contiguous().clone()
        self.W_qv_t = None if "qv" not in blocks else blocks["qv"].t().contiguous().clone()
        self.b0 = gate.layers[0].bias.detach().clone()
        self.hidden = [(layer.weight.detach().t().contiguous().clone(), layer.bias.detach().clone())
                       for layer in gate.layers[1:]]
        self.head = (gate.head.weight.detach().t().contiguous().clone(), gate.head.bias.detach().clone())
        self.act = gate.act.forward  # the module's function, without nn.Module.__call__'s hook overhead
        self._gate = gate

    def memory_part(self, V) -> torch.Tensor:
        """``W_v v`` for each row of V (what the retriever stores per memory; from the gate's
        current weights, like ``MemGate.precompute_memory``)."""
        with torch.no_grad():
            return self._gate.precompute_memory(V)

    def _tensor(self, x) -> torch.Tensor:
        """Arrays and tensors on the gate's device and dtype (no copy when they already are)."""
        x = x if isinstance(x, torch.Tensor) else torch.from_numpy(np.asarray(x))
        if x.dtype == self.b0.dtype and x.device == self.b0.device:
            return x
        return x.to(device=self.b0.device, dtype=self.b0.dtype)

    def _check(self, q: torch.Tensor, V: torch.Tensor, v_part: torch.Tensor) -> None:
        d, batched = self.config.dim, q.ndim == 2
        if q.ndim != V.ndim - 1 or q.ndim not in (1, 2) or q.shape[-1] != d or V.shape[-1] != d \
                or (batched and V.shape[0] != q.shape[0]):
            raise ValueError(f"expected q ({d},) and V (N, {d}), or q (B, {d}) and V (B, N, {d}), "
                             f"got {tuple(q.shape)} and {tuple(V.shape)}")
        if tuple(v_part.shape) != (*V.shape[:-1], self.config.hidden):
            raise ValueError(f"v_part has shape {tuple(v_part.shape)}, expected "
                             f"{(*V.shape[:-1], self.config.hidden)}")

    def score(self, q, V, v_part) -> torch.Tensor:
        """Gated cosine of one query ``q`` (d,) against ``V`` (N, d), given ``v_part`` (N, hidden);
        or of ``B`` queries at once: ``q`` (B, d), ``V`` (B, N, d), ``v_part`` (B, N, hidden) ->
        (B, N), the same scores as B single calls in one pass of batched matrix products."""
        q, V, v_part = self._tensor(q), self._tensor(V), self._tensor(v_part)
        self._check(q, V, v_part)
        # the weights are detached copies, so with detached inputs autograd records nothing: no
        # no_grad / inference_mode context to enter (tens of microseconds per call on 2 cores)
        return self._score(q.detach(), V.detach(), v_part.detach())

    def _score(self, q: torch.Tensor, V: torch.Tensor, v_part: torch.Tensor) -> torch.Tensor:
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
        for W_t, b in self.hidden:
            h = self.act(torch.addmm(b, h, W_t))
        g = torch.addmm(self.head[1], h, self.head[0]).sigmoid_()  # (B N, d) or (B N, 1)
        if self.config.mask_kind == "binary":
            g = (g > 0.5).to(g.dtype)
        g = g.view(*V.shape[:-1], g.shape[-1])
        Vg = g.mul_(V) if g.shape == V.shape else V * g
        num = torch.matmul(Vg, q.unsqueeze(-1)).squeeze(-1) if batched else torch.mv(Vg, q)
        return num.div_(torch.linalg.vector_norm(Vg, dim=-1).clamp_min_(eps))


# ----------------------------------------------------------------------------- ONNX Runtime


def gate_graph(fused: FusedGateScorer) -> bytes:
    """``fused``'s score for one query ``q`` (d,) and N candidates ``V`` (N, d) with their memory
    parts ``v_part`` (N, hidden), as a serialized float32 ONNX graph (opset 20) whose constants are
    the scorer's weights: the operations of ``FusedGateScorer._score``, one node each."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    nodes, consts = [], {}

    def const(name: str, value) -> str:
        consts[name] = numpy_helper.from_array(np.asarray(value), name)
        return name

    def op(kind: str, inputs: list, out: str, **attrs) -> str:
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
    if fused.W_q is None:
        h = op("Add", ["v_part", const("b0", w(fused.b0))], "h0")
    else:
        q_part = op("Add", [op("MatMul", [const("W_q", w(fused.W_q)), qn], "Wq_q"), const("b0", w(fused.b0))], "q_part")
        h = op("Add", ["v_part", q_part], "h0")
    if fused.W_qv_t is not None:
        h = op("Add", [h, op("MatMul", [op("Mul", [Vn, qn], "qv"), const("W_qv", w(fused.W_qv_t))], "qv_W")], "h0_qv")
    h = act(h, "a0")
    for i, (W_t, b) in enumerate(fused.hidden, start=1):
        h = act(op("Add", [op("MatMul", [h, const(f"W{i}", w(W_t))], f"m{i}"), const(f"b{i}", w(b))], f"h{i}"), f"a{i}")
    g = op("Sigmoid", [op("Add", [op("MatMul", [h, const("W_head", w(fused.head[0]))], "m_head"),
                                  const("b_head", w(fused.head[1]))], "logits")], "g")
    if fused.config.mask_kind == "binary":
        g = op("Cast", [op("Greater", [g, const("half", np.float32(0.5))], "g_on")], "g_bin", to=TensorProto.FLOAT)
    Vg = op("Mul", [g, Vn], "Vg")
    num = op("MatMul", [Vg, qn], "num")
    den = op("Max", [op("ReduceL2", [Vg, last], "Vg_norm", keepdims=0), eps], "Vg_norm_c")
    op("Div", [num, den], "score")
    d, hidden = fused.config.dim, fused.config.hidden
    graph = helper.make_graph(
        nodes, "memgate_gate_score",
        [helper.make_tensor_value_info("q", TensorProto.FLOAT, [d]),
         helper.make_tensor_value_info("V", TensorProto.FLOAT, ["n", d]),
         helper.make_tensor_value_info("v_part", TensorProto.FLOAT, ["n", hidden])],
        [helper.make_tensor_value_info("score", TensorProto.FLOAT, ["n"])], initializer=list(consts.values()))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)], producer_name="memgate")
    model.ir_version = 9
    onnx.checker.check_model(model)
    return model.SerializeToString()


GRAPH_FORMAT = "memgate-gate-graph/1"  # bump when gate_graph changes what it writes


def graph_dir() -> Path:
    """Where built gate graphs are kept (``$MEMGATE_GATE_CACHE``, else the user cache)."""
    if os.environ.get("MEMGATE_GATE_CACHE"):
        return Path(os.environ["MEMGATE_GATE_CACHE"]).expanduser()
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "memgate" / "gates"


def graph_key(fused: FusedGateScorer) -> str:
    """A name for this scorer's graph: the graph format, the architecture and every weight."""
    digest = hashlib.sha256(GRAPH_FORMAT.encode())
    digest.update(json.dumps(fused.config.to_dict(), sort_keys=True).encode())
    for t in (fused.W_q, fused.W_qv_t, fused.b0, *(x for pair in fused.hidden for x in pair), *fused.head):
        if t is not None:
            digest.update(t.detach().cpu().numpy().tobytes())
    return digest.hexdigest()[:24]


def cached_gate_graph(fused: FusedGateScorer, rebuild: bool = False) -> tuple[bytes, bool]:
    """``(gate_graph(fused), from_cache)``: building imports onnx (about half a second), so a
    built graph is kept in ``graph_dir()`` by ``graph_key`` and read back by later processes
    (``rebuild`` replaces the kept one; an unwritable cache only costs the rebuild)."""
    path = graph_dir() / f"{graph_key(fused)}.onnx"
    if path.is_file() and not rebuild:
        return path.read_bytes(), True
    graph = gate_graph(fused)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path.parent, suffix=".tmp", delete=False) as f:
            f.write(graph)
        os.replace(f.name, path)
    except OSError:
        pass
    return graph, False


class OnnxGateScorer:
    """``score(q, V, v_part)`` of ``FusedGateScorer`` for a float32 CPU gate, in ONNX Runtime.

    The graph comes from ``cached_gate_graph``; whatever its source, the session is checked
    against the torch scorer on seeded probe vectors before it is used (a graph that disagrees,
    e.g. a damaged cache file, is rebuilt; if the rebuilt one disagrees too, construction fails)."""

    def __init__(self, gate: MemGate, threads: Optional[int] = None):
        if not isinstance(gate, MemGate):
            raise TypeError(f"gate must be a MemGate, got {type(gate).__name__}")
        if gate.head.weight.dtype != torch.float32 or gate.head.weight.device.type != "cpu":
            raise ValueError("OnnxGateScorer scores float32 gates on the CPU (use FusedGateScorer)")
        self.fused = FusedGateScorer(gate)
        self.config = gate.config
        self.threads = threads if threads is not None else int(os.environ.get("MEMGATE_GATE_THREADS", "0") or 0)
        graph, cached = cached_gate_graph(self.fused)
        try:
            self.session = self._session(graph)
            ok = self._agrees()
        except Exception:  # noqa: BLE001 - a damaged cache file: rebuilt below
            if not cached:
                raise
            ok = False
        if not ok and cached:
            self.session = self._session(cached_gate_graph(self.fused, rebuild=True)[0])
            ok = self._agrees()
        if not ok:
            raise RuntimeError("the gate's ONNX Runtime graph disagrees with FusedGateScorer on probe vectors")

    def _session(self, graph: bytes):
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
        v_part = self.fused.memory_part(V).numpy()
        got = self.session.run(None, {"q": q, "V": V, "v_part": v_part})[0]
        return bool(np.abs(got - self.fused.score(q, V, v_part).numpy()).max() <= 1e-5)

    def memory_part(self, V) -> torch.Tensor:
        return self.fused.memory_part(V)

    def score(self, q, V, v_part) -> torch.Tensor:
        """The gated cosine of ``q`` (d,) against ``V`` (N, d) given ``v_part`` (N, hidden) -> (N,);
        a batch (``q`` (B, d)) is scored by the torch scorer. Arrays or CPU tensors; float32 inputs
        are not copied."""
        q, V, v_part = _array(q), _array(V), _array(v_part)
        if q.ndim == 2:
            return self.fused.score(q, V, v_part)
        d, hidden = self.config.dim, self.config.hidden
        if q.shape != (d,) or V.ndim != 2 or V.shape[1] != d:
            raise ValueError(f"expected q ({d},) and V (N, {d}), or q (B, {d}) and V (B, N, {d}), "
                             f"got {q.shape} and {V.shape}")
        if v_part.shape != (V.shape[0], hidden):
            raise ValueError(f"v_part has shape {v_part.shape}, expected {(V.shape[0], hidden)}")
        if V.shape[0] == 0:
            return torch.zeros(0, dtype=torch.float32)
        return torch.from_numpy(self.session.run(None, {"q": q, "V": V, "v_part": v_part})[0])


def _array(x) -> np.ndarray:
    """A C-contiguous float32 array of ``x`` (a view when it is one already)."""
    if isinstance(x, torch.Tensor):
        x = x.detach()
        x = x.numpy() if x.dtype == torch.float32 and x.device.type == "cpu" else x.float().cpu().numpy()
    return np.ascontiguousarray(x, dtype=np.float32)


def fast_gate_scorer(gate: MemGate, threads: Optional[int] = None):
    """The retriever's scorer: ``OnnxGateScorer`` when onnxruntime is installed and the gate is a
    float32 CPU gate, else ``FusedGateScorer`` (the same scores)."""
    float_cpu = gate.head.weight.dtype == torch.float32 and gate.head.weight.device.type == "cpu"
    if float_cpu and importlib.util.find_spec("onnxruntime") is not None \
            and os.environ.get("MEMGATE_GATE_BACKEND", "auto") != "torch":
        return OnnxGateScorer(gate, threads)
    return FusedGateScorer(gate)



__all__ = ["FusedGateScorer", "OnnxGateScorer", "cached_gate_graph", "fast_gate_scorer", "gate_graph", "graph_key",
           "rank_by_score"]
