"""Every loss against a naive float64 reference written here with Python loops."""

from __future__ import annotations

import math
from typing import Any

import pytest
import torch

from jobs.losses import NumericVocab, build_loss, terms
from jobs.spec import LossSpec

V = 48
DIGITS = NumericVocab([30, 3, 17, 41, 8, 22, 35, 12, 27, 44], [float(i) for i in range(10)])
# Irregular values, some sharing a value, with digit lengths as a tokenizer would give.
IRREGULAR = NumericVocab(
    [5, 11, 19, 26, 33, 40], [0.0, 1.0, 2.0, 10.0, 100.0, 5.0], [1, 1, 1, 2, 3, 2]
)


def make_batch(vocab: NumericVocab, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Random logits [3, 9, V] and labels mixing ignored, plain and numeric-run targets."""
    gen = torch.Generator().manual_seed(seed)
    logits = torch.randn(3, 9, V, generator=gen) * 2.0
    ids = torch.tensor(vocab.token_ids)
    labels = torch.randint(0, V, (3, 9), generator=gen)
    numeric = torch.rand(3, 9, generator=gen) < 0.55
    labels = torch.where(numeric, ids[torch.randint(0, len(ids), (3, 9), generator=gen)], labels)
    labels[0, :2] = -100
    labels[2, -1] = -100
    return logits, labels


def naive(
    spec: LossSpec, vocab: NumericVocab, logits: torch.Tensor, labels: torch.Tensor
) -> dict[str, Any]:
    """Loops over positions and runs, float64 throughout."""
    x = logits.double()
    values = torch.tensor(vocab.values, dtype=torch.float64)
    slot_of = {t: i for i, t in enumerate(vocab.token_ids)}
    n = len(values)
    # Distance terms: log(1 + v) when asked, or by default once a token has several digits.
    log_scale = spec.distance == "log" or (spec.distance == "auto" and max(vocab.values) > 9)
    scaled = torch.log1p(values) if log_scale else values

    def distances(vals: torch.Tensor) -> list[list[Any]]:
        dist = [[abs(vals[i] - vals[j]) for j in range(n)] for i in range(n)]
        if spec.squash is None:
            return dist
        nz = [d for row in dist for d in row if d > 0]
        lo, hi = min(nz), max(nz)
        return [
            [0 * d if d == 0 else 1 + (d - lo) * (spec.squash - 1) / (hi - lo) for d in row]
            for row in dist
        ]

    dist = distances(values)  # kernels always use |v_i - v_j|

    def kern(d: Any) -> Any:
        if spec.kernel == "gaussian":
            return torch.exp(-(d**2) / (2 * spec.bandwidth**2))
        return torch.exp(-d / spec.bandwidth)

    K = torch.stack(
        [torch.stack([kern(torch.as_tensor(d, dtype=torch.float64)) for d in row]) for row in dist]
    )
    D = torch.tensor([[float(d) for d in row] for row in distances(scaled)], dtype=torch.float64)
    alpha = 1 / (2 * K.sum(1).mean()) if spec.smooth_weight == "auto" else spec.smooth_weight

    ce_terms, token_terms, runs = [], [], []
    parts: dict[str, list[Any]] = {"mmd": [], "smooth": []}
    for b in range(labels.shape[0]):
        current: list[tuple[int, int]] = []
        for t in range(labels.shape[1] + 1):
            y = int(labels[b, t]) if t < labels.shape[1] else -100
            if y in slot_of:
                current.append((t, slot_of[y]))
            elif current:
                runs.append((b, current))
                current = []
            if y == -100:
                continue
            ce_terms.append(-torch.log_softmax(x[b, t], -1)[y])
            if y not in slot_of:
                continue
            k = slot_of[y]
            p = torch.softmax(x[b, t, vocab.token_ids], -1)
            r = p - torch.nn.functional.one_hot(torch.tensor(k), n).double()
            mmd = sum(r[i] * K[i, j] * r[j] for i in range(n) for j in range(n))
            smooth = alpha * (sum(K[i].sum() * r[i] ** 2 for i in range(n)) - mmd)
            parts["mmd"].append(mmd)
            parts["smooth"].append(smooth)
            token_terms.append(
                {
                    "emd": sum(p[i] * D[i, k] for i in range(n)),
                    "mse": (sum(p[i] * scaled[i] for i in range(n)) - scaled[k]) ** 2,
                    "mmd": mmd,
                    "smmd": torch.relu(mmd + smooth),
                }
            )
    ce = sum(ce_terms) / len(ce_terms)
    mean = {
        key: sum(tt[key] for tt in token_terms) / max(len(token_terms), 1) for key in token_terms[0]
    }
    out = {"ce": ce, **mean, "smooth": sum(parts["smooth"]) / len(parts["smooth"])}

    # NTIL: weighted token EMD, and per-number relative / magnitude terms.
    weighted, rel, mag = [], [], []
    for b, run in runs:
        lens = [vocab.digit_lengths[k] for _, k in run]
        X = Y = torch.zeros((), dtype=torch.float64)
        for i, (t, k) in enumerate(run):
            logit = x[b, t, vocab.token_ids]
            p = torch.softmax(logit, -1)
            weighted.append(
                (1 + spec.sigma) ** (len(run) - i - 1) * sum(p[j] * D[j, k] for j in range(n))
            )
            if spec.ntil_value == "expectation":
                v = sum(p[j] * values[j] for j in range(n))
            else:
                soft = torch.softmax(logit / spec.gumbel_tau, -1)
                hard = torch.nn.functional.one_hot(logit.argmax(), n).double()
                v = ((hard - soft.detach() + soft) * values).sum()
            place = 10.0 ** sum(lens[i + 1 :])
            X = X + v * place
            Y = Y + values[k] * place
        hi, lo = torch.maximum(X, Y), torch.minimum(X, Y)
        rel.append((X - Y).abs() / (hi + 1))
        mag.append(torch.log((hi + 1) / (lo + 1)))
    out["ntil_emd"] = sum(weighted) / len(token_terms)
    out["relative"] = sum(rel) / len(rel)
    out["magnitude"] = sum(mag) / len(mag)
    out["ntil"] = out["ntil_emd"] + spec.alpha * out["relative"] + spec.beta * out["magnitude"]
    return out


CASES = [
    LossSpec(name="emd"),
    LossSpec(name="emd", squash=3.0),
    LossSpec(name="ntl_mse"),
    LossSpec(name="ntl_mse", distance="absolute"),
    LossSpec(name="emd", distance="log", squash=2.0),
    LossSpec(name="mmd", kernel="gaussian", bandwidth=1.5),
    LossSpec(name="mmd", kernel="laplacian", bandwidth=3.0),
    LossSpec(name="smmd"),
    LossSpec(name="smmd", smooth_weight=0.7, squash=2.0),
    LossSpec(name="ntil", ntil_value="expectation", sigma=0.5),
    LossSpec(name="ntil", ntil_value="expectation", distance="absolute"),
    LossSpec(name="ntil", ntil_value="gumbel", gumbel_noise=0.0, gumbel_tau=0.5),
    LossSpec(name="emd", mixing="ratio", weight=0.5),
]
HEADLINE = {"emd": "emd", "ntl_mse": "mse", "mmd": "mmd", "smmd": "smmd", "ntil": "ntil"}


@pytest.mark.parametrize("vocab", [DIGITS, IRREGULAR], ids=["digits", "irregular"])
@pytest.mark.parametrize(
    "spec", CASES, ids=lambda s: f"{s.name}-{s.mixing}-{s.kernel}-{s.squash}-{s.distance}"
)
@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("rows", ["numeric", "all"])
def test_matches_naive_reference_values_and_gradients(
    spec: LossSpec, vocab: NumericVocab, seed: int, rows: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if rows == "all":  # the accelerator path: every row computed, then masked
        monkeypatch.setattr(terms, "number_rows", lambda s: None)
    logits, labels = make_batch(vocab, seed)
    ours_in = logits.clone().requires_grad_()
    out = build_loss(spec, vocab)(ours_in, labels)
    ref_in = logits.double().requires_grad_()
    ref = naive(spec, vocab, ref_in, labels)

    numeric = ref[HEADLINE[spec.name]]
    assert out.ce.item() == pytest.approx(ref["ce"].item(), rel=1e-5, abs=1e-6)
    assert out.numeric.item() == pytest.approx(numeric.item(), rel=1e-5, abs=1e-6)
    if spec.name == "smmd":
        assert out.parts["mmd"].item() == pytest.approx(ref["mmd"].item(), rel=1e-5, abs=1e-6)
        assert out.parts["smooth"].item() == pytest.approx(ref["smooth"].item(), rel=1e-4, abs=1e-6)
    if spec.name == "ntil":
        for key, ref_key in (
            ("emd", "ntil_emd"),
            ("relative", "relative"),
            ("magnitude", "magnitude"),
        ):
            assert out.parts[key].item() == pytest.approx(ref[ref_key].item(), rel=1e-5, abs=1e-6)

    if spec.mixing == "ratio":
        ref_total = ref["ce"] + spec.weight * (ref["ce"] / numeric).detach() * numeric
    else:
        ref_total = ref["ce"] + spec.weight * numeric
    assert out.total.item() == pytest.approx(ref_total.item(), rel=1e-5)

    out.total.backward()
    ref_total.backward()
    assert ours_in.grad is not None and ref_in.grad is not None
    torch.testing.assert_close(ours_in.grad.double(), ref_in.grad, rtol=1e-4, atol=1e-6)


def test_ce_equals_torch_cross_entropy() -> None:
    logits, labels = make_batch(DIGITS, 3)
    out = build_loss(LossSpec(name="ce"), DIGITS)(logits, labels)
    ref = torch.nn.functional.cross_entropy(logits.reshape(-1, V), labels.reshape(-1))
    assert out.ce.item() == pytest.approx(ref.item(), rel=1e-6)
    assert out.numeric.item() == 0.0 and out.parts == {}
    assert math.isclose(out.total.item(), out.ce.item())
