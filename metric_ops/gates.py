"""Release gates over a comparison (issue 28): one rule for ``facetlake compare
--fail-on-regression`` and the ``comparisons`` regression asset check, so a CI job and a
schedule never disagree.

A gate fires on

- ``regression`` (always on with a baseline): a model significantly worse than the
  baseline on a score (Holm-adjusted paired test, the ``pairwise`` row's verdict);
- ``margin`` (non-inferiority, metric units): the interval of the difference cannot rule
  out a loss larger than the margin, i.e. its worse bound is below ``-margin`` (the
  confidence-interval form of a non-inferiority test; Schuirmann, 1987; ICH E9);
- ``min`` / ``max``: a model's mean (or pass rate) below the floor / above the ceiling;
- ``max_severity``: one sample worse than the baseline by more than this (a catastrophic
  sample fails the gate even when the mean moved by nothing significant);
- ``min_trials_passed`` (repeated trials, ``trials: k``): a binary score that some sample
  of a model passed in fewer than m of its k trials (m of k; read from the ``trials`` rows'
  pass histogram, the samples with the fewest passes named).

Rules come from the spec's ``gate:`` block, each a mapping of score name (or ``"*"`` for
every score) to a number::

    gate:
      margin: {token_f1: 0.02}
      min: {exact_match: 0.6}
      max_severity: {"*": 0.5}
      min_trials_passed: {exact_match: 3}

Input rows are the ``comparisons`` rows of one fingerprint (dicts, ``detail`` as a dict or
its JSON). :func:`junit_xml` and :func:`markdown_summary` write the verdicts for CI.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence
from xml.etree import ElementTree as ET

from metric_ops.errors import FacetlakeError

GATE_KINDS = ("margin", "min", "max", "max_severity", "min_trials_passed")
WORST_SHOWN = 5


class GateError(FacetlakeError, ValueError):
    """A ``gate:`` block that cannot be read (unknown rule, non-numeric threshold)."""


@dataclass(frozen=True)
class GateRules:
    """Parsed ``gate:`` rules: per kind, score name (or ``"*"``) -> threshold (metric units)."""

    margin: Mapping[str, float] = field(default_factory=dict)
    min: Mapping[str, float] = field(default_factory=dict)
    max: Mapping[str, float] = field(default_factory=dict)
    max_severity: Mapping[str, float] = field(default_factory=dict)
    min_trials_passed: Mapping[str, float] = field(default_factory=dict)

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any] | None, where: str = "gate") -> "GateRules":
        """Validate a ``gate:`` block; raises :class:`GateError` naming the key and the fix."""
        if not data:
            return cls()
        if not isinstance(data, Mapping):
            raise GateError(f"{where}: expected a mapping of rules ({', '.join(GATE_KINDS)}), e.g. gate: {{margin: {{token_f1: 0.02}}}}")
        unknown = set(data) - set(GATE_KINDS)
        if unknown:
            raise GateError(f"{where}: unknown gate rules {sorted(unknown)}; allowed: {', '.join(GATE_KINDS)}")
        parsed: dict[str, dict[str, float]] = {}
        for kind, rules in data.items():
            if not isinstance(rules, Mapping) or not rules:
                raise GateError(f"{where}.{kind}: map a score name (or '*') to a number, e.g. {kind}: {{token_f1: 0.02}}")
            out = {}
            for metric, value in rules.items():
                if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(float(value)):
                    raise GateError(f"{where}.{kind}.{metric}: {value!r} is not a finite number")
                if kind in ("margin", "max_severity") and float(value) < 0:
                    raise GateError(f"{where}.{kind}.{metric}: must be >= 0 (a size in the metric's units), got {value}")
                if kind == "min_trials_passed" and (float(value) < 1 or float(value) != int(value)):
                    raise GateError(f"{where}.{kind}.{metric}: a whole number of trials >= 1 (m of the spec's trials: k), got {value}")
                out[str(metric)] = float(value)
            parsed[kind] = out
        return cls(**parsed)

    def to_mapping(self) -> dict[str, dict[str, float]]:
        """The rules as plain data (only the kinds that hold rules)."""
        return {k: dict(getattr(self, k)) for k in GATE_KINDS if getattr(self, k)}

    def threshold(self, kind: str, metric: str) -> float | None:
        """The rule of ``kind`` for ``metric`` (its own, else ``"*"``), or None."""
        rules = getattr(self, kind)
        return rules.get(metric, rules.get("*"))


@dataclass(frozen=True)
class Firing:
    """One gate that fired: ``gate`` in ``regression`` + :data:`GATE_KINDS`."""

    gate: str
    model: str
    metric: str
    message: str
    baseline: str | None = None
    delta: float | None = None
    ci: tuple[float | None, float | None] = (None, None)
    mde: float | None = None
    p_holm: float | None = None
    worst: tuple[str, ...] = ()


@dataclass(frozen=True)
class GateVerdict:
    """The gate over one fingerprint's comparisons: ``fired`` (empty = passed) and the
    pairwise rows it checked."""

    fired: tuple[Firing, ...]
    checked: tuple[Mapping[str, Any], ...]

    @property
    def passed(self) -> bool:
        return not self.fired


def row_detail(row: Mapping[str, Any]) -> dict[str, Any]:
    """A comparisons row's ``detail`` as a dict, whether stored as JSON text or held as a dict ({} when neither)."""
    detail = row.get("detail")
    if isinstance(detail, str):
        try:
            detail = json.loads(detail)
        except ValueError:
            return {}
    return dict(detail) if isinstance(detail, Mapping) else {}


def _sign(direction: str | None) -> float:
    return -1.0 if direction == "minimize" else 1.0


def _fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:+.4g}"


def _worst_ids(rows: Sequence[Mapping[str, Any]], model: str, metric: str, baseline: str | None) -> tuple[str, ...]:
    changes = [r for r in rows if r.get("kind") == "sample_change" and r.get("verdict") == "regressed"
               and r.get("model") == model and r.get("metric") == metric and r.get("baseline") == baseline]
    changes.sort(key=lambda r: row_detail(r).get("rank", 0))
    return tuple(str(r["sample_id"]) for r in changes[:WORST_SHOWN])


def evaluate_gates(rows: Sequence[Mapping[str, Any]], baseline: str | None, rules: GateRules | None = None) -> GateVerdict:
    """Every gate that fires over one fingerprint's ``comparisons`` rows (see the module
    docstring). Only pairs against ``baseline`` are gated (every pair when it is None)."""
    rules = rules or GateRules()
    fired: list[Firing] = []
    pairs = [r for r in rows if r.get("kind") == "pairwise" and (baseline is None or r.get("baseline") == baseline)]
    for r in pairs:
        model, metric, base = r["model"], r["metric"], r.get("baseline")
        det = row_detail(r)
        low, high, mde = det.get("delta_ci_low"), det.get("delta_ci_high"), det.get("mde")
        sign = _sign(r.get("direction"))
        common = dict(model=model, metric=metric, baseline=base, delta=r.get("delta"), ci=(low, high), mde=mde,
                      p_holm=r.get("p_holm"), worst=_worst_ids(rows, model, metric, base))
        text = f"{model} - {base}: {_fmt(r.get('delta'))} [{_fmt(low)}, {_fmt(high)}] {metric}"
        if r.get("verdict") == "regressed":
            fired.append(Firing("regression", message=f"{text}, p_holm {r.get('p_holm'):.3g}: significant regression", **common))
        margin = rules.threshold("margin", metric)
        if margin is not None and r.get("delta") is not None:
            bounds = [b for b in (low, high) if b is not None]
            worse = min(sign * b for b in bounds) if len(bounds) == 2 else sign * r["delta"]
            if worse < -margin:
                fired.append(Firing("margin", message=f"{text}: the interval allows a loss beyond the margin {margin:g}", **common))
        severity = rules.threshold("max_severity", metric)
        if severity is not None:
            drops = [sign * (c["baseline_mean"] - c["mean"]) for c in rows
                     if c.get("kind") == "sample_change" and c.get("verdict") == "regressed" and c.get("model") == model
                     and c.get("metric") == metric and c.get("baseline") == base
                     and c.get("mean") is not None and c.get("baseline_mean") is not None]
            if drops and max(drops) > severity:
                fired.append(Firing("max_severity", message=f"{model} {metric}: one sample dropped by {max(drops):.4g} "
                                                            f"(> max_severity {severity:g})", **common))
    for r in rows:
        if r.get("kind") != "model_metric" or r.get("mean") is None or (baseline is not None and r.get("model") == baseline):
            continue
        floor, ceiling = rules.threshold("min", r["metric"]), rules.threshold("max", r["metric"])
        if floor is not None and r["mean"] < floor:
            fired.append(Firing("min", r["model"], r["metric"], f"{r['model']} {r['metric']} mean {r['mean']:.4g} < min {floor:g}",
                                delta=None, ci=(r.get("ci_low"), r.get("ci_high"))))
        if ceiling is not None and r["mean"] > ceiling:
            fired.append(Firing("max", r["model"], r["metric"], f"{r['model']} {r['metric']} mean {r['mean']:.4g} > max {ceiling:g}",
                                delta=None, ci=(r.get("ci_low"), r.get("ci_high"))))
    fired += _trials_firings(rows, baseline, rules)
    return GateVerdict(tuple(fired), tuple(pairs))


def _trials_firings(rows: Sequence[Mapping[str, Any]], baseline: str | None, rules: GateRules) -> list[Firing]:
    """``min_trials_passed`` over the ``trials`` rows of binary scores (not the baseline's)."""
    out = []
    for r in rows:
        if r.get("kind") != "trials" or (baseline is not None and r.get("model") == baseline):
            continue
        m = rules.threshold("min_trials_passed", r["metric"])
        det = row_detail(r)
        hist = det.get("pass_histogram")
        if m is None or hist is None:
            continue
        short = sum(int(n) for c, n in hist.items() if int(c) < m)
        if short:
            worst = tuple(str(sid) for sid, c, _ in det.get("fewest_passes", []) if c < m)
            out.append(Firing("min_trials_passed", r["model"], r["metric"],
                              f"{r['model']} {r['metric']}: {short} of {r.get('n_total')} samples passed fewer than "
                              f"{int(m)} of {det.get('k')} trials", worst=worst))
    return out


def _failure_text(f: Firing) -> str:
    lines = [f.message, f"gate: {f.gate}", f"metric: {f.metric}", f"difference: {_fmt(f.delta)}",
             f"interval: [{_fmt(f.ci[0])}, {_fmt(f.ci[1])}]", f"detectable effect: {'n/a' if f.mde is None else f'{f.mde:.4g}'}"]
    if f.worst:
        lines.append("worst samples: " + ", ".join(f.worst))
    return "\n".join(lines)


def junit_xml(verdicts: Iterable[tuple[str, GateVerdict]]) -> str:
    """JUnit XML (one ``testsuite`` per evaluation label, one ``testcase`` per gated pair
    and per fired floor) that CI systems render; a fired gate is a ``failure`` whose text
    names the metric, difference, interval, detectable effect and the worst sample ids."""
    root = ET.Element("testsuites", name="facetlake gates")
    total = failures = 0
    for label, verdict in verdicts:
        suite = ET.SubElement(root, "testsuite", name=label)
        cases: dict[tuple[str, str, str], ET.Element] = {}
        for r in verdict.checked:
            key = (r["model"], r["metric"], str(r.get("baseline")))
            cases[key] = ET.SubElement(suite, "testcase", classname=f"{label}.{r['metric']}", name=f"{r['model']} vs {r.get('baseline')}")
        for f in verdict.fired:
            key = (f.model, f.metric, str(f.baseline))
            case = cases.get(key)
            if case is None:
                case = cases[key] = ET.SubElement(suite, "testcase", classname=f"{label}.{f.metric}", name=f"{f.model} {f.gate}")
            failure = ET.SubElement(case, "failure", message=f.message, type=f.gate)
            failure.text = _failure_text(f)
        suite.set("tests", str(len(cases)))
        suite.set("failures", str(sum(1 for c in cases.values() if c.find("failure") is not None)))
        total += len(cases)
        failures += int(suite.get("failures"))
    root.set("tests", str(total))
    root.set("failures", str(failures))
    return ET.tostring(root, encoding="unicode", xml_declaration=True)


def markdown_summary(verdicts: Iterable[tuple[str, GateVerdict]]) -> str:
    """A Markdown verdict for a pull-request comment: pass/fail, then one table row per
    fired gate (evaluation, gate, model, metric, difference [interval], detectable, worst ids)."""
    verdicts = list(verdicts)
    fired = [(label, f) for label, v in verdicts for f in v.fired]
    checked = sum(len(v.checked) for _, v in verdicts)
    head = "FAILED" if fired else "PASSED"
    lines = [f"## facetlake gate: {head}", "",
             f"{len(verdicts)} evaluation(s), {checked} model x metric comparison(s) against the baseline, "
             f"{len(fired)} gate(s) fired.", ""]
    if fired:
        lines += ["| evaluation | gate | model | metric | difference [95% CI] | detectable | worst samples |",
                  "| --- | --- | --- | --- | --- | --- | --- |"]
        for label, f in fired:
            diff = f"{_fmt(f.delta)} [{_fmt(f.ci[0])}, {_fmt(f.ci[1])}]"
            mde = "" if f.mde is None else f"{f.mde:.4g}"
            lines.append(f"| {label} | {f.gate} | {f.model} | {f.metric} | {diff} | {mde} | {', '.join(f.worst)} |")
    return "\n".join(lines) + "\n"
