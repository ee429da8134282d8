"""Evaluation specs and the configuration fingerprint.

An evaluation spec (YAML) names a dataset, the adapter and prompt template, generation
settings, annotators, the models to run and the metrics to score::

    name: sfres
    dataset: {kind: sfres, limit: 300}
    adapter: {kind: generation, template: "{input}", version: "1"}
    generation: {temperature: 0.0, max_tokens: 128, seed: 0, logprobs: false}
    annotators: []
    models:
      sfres-system: "precomputed:column=system_output"
    metrics: [exact_match, token_f1, bleu, rouge_l]

The fingerprint is SHA-256 over everything that defines the evaluation besides the model
(DESIGN.md): the dataset's content hash (not its name or path), adapter and template,
generation settings, annotator configuration and their versions. The package version
and the metric list are not in it: metrics are added by rescoring, and an upgrade that
changes none of these keeps recurring evaluations comparable.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import yaml

from metric_ops.base import Sample
from metric_ops.errors import FacetlakeError
from metric_ops.gates import GateError, GateRules
from resources.datasets import Dataset, content_hash, make_dataset

MODEL_SLUG = re.compile(r"^[a-z0-9._-]{1,80}$")
# evaluation names become partition keys (``name@fp12``): a slug, starting alphanumeric
EVALUATION_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")
FINGERPRINT = re.compile(r"^[0-9a-f]{64}$")

DEFAULT_ADAPTER = {"kind": "generation", "template": "{input}", "version": "1"}
DEFAULT_GENERATION = {"temperature": 0.0, "max_tokens": 256, "seed": 0, "logprobs": False, "top_logprobs": 0}


class SpecError(FacetlakeError, ValueError):
    """An evaluation spec is invalid; the message names the key and the fix."""


def slugify_model(name: str) -> str:
    """A model partition key: lower-case ``[a-z0-9._-]``, other characters become ``-``."""
    slug = re.sub(r"[^a-z0-9._-]+", "-", name.lower()).strip("-")
    if not slug:
        raise SpecError(f"model name {name!r} has no usable characters; use letters, digits, '.', '_' or '-'")
    return slug[:80]


def model_key_for(spec: str) -> str:
    """The model key derived from a model spec when ``models:`` is given as a list: the
    API model name for ``api:MODEL@URL``, the folder or file name for ``hf:PATH`` and
    ``precomputed:FILE``, the column for ``precomputed:column=X``, else the target."""
    kind, _, target = str(spec).partition(":")
    if kind == "api":
        target = target.partition("@")[0]
    elif kind == "precomputed" and target.startswith("column="):
        target = target.split("=", 1)[1]
    elif kind in ("hf", "precomputed"):
        target = Path(target.rstrip("/")).name
        if kind == "precomputed":
            target = Path(target).stem
    elif kind == "vllm":
        target = target.rstrip("/").replace("/", "-")
    return slugify_model(target)


def model_keys(specs: list[Any], where: str) -> dict[str, str]:
    """``models:`` given as a list: key -> spec, with derived keys (:func:`model_key_for`)
    that must be unique. Two specs deriving one key are refused naming both (map them
    explicitly: ``models: {name-a: SPEC, name-b: SPEC}``)."""
    out: dict[str, str] = {}
    for spec in specs:
        key = model_key_for(str(spec))
        if key in out:
            raise SpecError(
                f"{where}: models {out[key]!r} and {spec!r} both get the model key {key!r}; give them names: "
                f"models: {{{key}-a: {out[key]!r}, {key}-b: {spec!r}}}"
            )
        out[key] = str(spec)
    return out


_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def canonical_json(value: Any) -> str:
    """Deterministic JSON (sorted keys, no spaces) used for hashing: ``json.dumps(value,
    sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)``, through one
    encoder (``json.dumps`` with options builds a new one per call; this is called per sample)."""
    return _CANONICAL.encode(value)


def fingerprint_of(inputs: Mapping[str, Any]) -> str:
    """SHA-256 (64 lowercase hex) of the canonical JSON of the fingerprint inputs."""
    return hashlib.sha256(canonical_json(inputs).encode("utf-8")).hexdigest()


@dataclass
class EvaluationSpec:
    """A parsed evaluation spec; see the module docstring for the YAML shape."""

    name: str
    dataset: dict[str, Any]
    models: dict[str, str]
    metrics: list[str]
    adapter: dict[str, Any] = field(default_factory=lambda: dict(DEFAULT_ADAPTER))
    generation: dict[str, Any] = field(default_factory=lambda: dict(DEFAULT_GENERATION))
    annotators: list[dict[str, Any]] = field(default_factory=list)
    metric_params: dict[str, dict[str, Any]] = field(default_factory=dict)
    # how generation runs, not what it produces (batch size, concurrency, prices, key env
    # var name, ...): NOT in the fingerprint; see docs/backends.md
    runtime: dict[str, Any] = field(default_factory=dict)
    # the model the regression alert compares every other model against (issue 8);
    # not in the fingerprint
    baseline: str | None = None
    # the sample field whose values group items into clusters (issue 28: several questions per
    # passage, summaries per document): a key of the samples' metadata or a samples column
    # (input, context); every interval and paired test then resamples clusters. Default: the
    # dataset kind's natural cluster (squad_v2: context). Not in the fingerprint.
    cluster: str | None = None
    # release gates (issue 28, metric_ops/compare/gates.py): margin / min / max / max_severity / min_trials_passed
    # per score name; drive `compare --fail-on-regression` and the regression asset check alike.
    # Not in the fingerprint.
    gate: dict[str, dict[str, float]] = field(default_factory=dict)
    # repeated trials (issue 28, metric_ops/stats/trials.py): every sample generated and scored
    # k times, stored as <sample_id>#<trial>; in the fingerprint when k > 1, and a larger k
    # reuses the trials already stored (resources/backends/planning.py donors)
    trials: int = 1
    trial_repeat: str = "both"  # what a trial repeats: generation, judging or both (TRIAL_REPEATS)
    # anonymisation before outbound calls (privacy issue, resources/privacy/policy.py); in the
    # fingerprint only when anonymisation is on (it changes what an API model sees)
    privacy: dict[str, Any] = field(default_factory=dict)
    # practitioner profile (resources/catalog/profiles.py): its recommended metrics are added
    profile: str | None = None
    # cron string of the evaluation's own schedule (pipelines/sensors.py); not in the fingerprint
    schedule: str | None = None
    # an lm-evaluation-harness task run by lm-eval itself (issue 18, resources/lm_eval/bridge.py);
    # not in the fingerprint as such (the adapter block carries the task config lm-eval used)
    lm_eval: dict[str, Any] = field(default_factory=dict)
    # human review (issue 29, metric_ops/review/rubric.py): rubrics, reviewers; not in the fingerprint
    review: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any], where: str = "evaluation spec", check_secrets: bool = True) -> "EvaluationSpec":
        """Validate and build a spec; raises :class:`SpecError` naming the problem, also for
        anything that looks like a secret (:func:`refuse_spec_secrets`). ``check_secrets=False``
        only for reading a spec back from the lake (a lake written before the check may hold
        one; the catalog refuses to write it again)."""
        if not isinstance(data, Mapping):
            raise SpecError(f"{where}: expected a mapping with name, dataset, models, metrics")
        if check_secrets:  # before anything else: no message, table or history may hold a key
            refuse_spec_secrets(data, where)
        known = {"name", "dataset", "models", "metrics", "adapter", "generation", "annotators", "metric_params", "runtime", "baseline",
                 "privacy", "profile", "schedule", "lm_eval", "cluster", "gate", "trials", "review", "budget"}
        unknown = set(data) - known
        if unknown:
            raise SpecError(f"{where}: unknown keys {sorted(unknown)}; allowed: {sorted(known)}")
        for key in ("name", "dataset", "models", "metrics"):
            if key not in data and not (key == "metrics" and data.get("profile")) and not (key in ("dataset", "metrics") and data.get("lm_eval")):
                raise SpecError(f"{where}: missing key {key!r}")
        name = str(data["name"])
        if not EVALUATION_NAME.match(name):
            raise SpecError(f"{where}: name {name!r} must be lower-case letters, digits, '.', '_' or '-' "
                            f"(it names the evaluation's partitions); try {slugify_model(name)!r}")
        models = data["models"]
        if isinstance(models, list):
            models = model_keys(models, where)
        if not isinstance(models, Mapping) or not models:
            raise SpecError(f"{where}: models must map a model name to a spec, e.g. {{my-model: 'precomputed:outputs.jsonl'}}")
        for slug in models:
            if not MODEL_SLUG.match(str(slug)):
                raise SpecError(f"{where}: model name {slug!r} must match [a-z0-9._-]+ (try {slugify_model(str(slug))!r})")
        metrics = data.get("metrics") or []
        if isinstance(metrics, str):
            metrics = [metrics]
        if data.get("profile"):
            from resources.catalog.profiles import profile_metrics

            metrics = profile_metrics(str(data["profile"]), [str(m) for m in metrics], data.get("metric_params"), where=where)
        adapter = {**DEFAULT_ADAPTER, **dict(data.get("adapter") or {})}
        generation = {**DEFAULT_GENERATION, **dict(data.get("generation") or {})}
        pin = (data.get("dataset") or {}).get("pin") if isinstance(data.get("dataset"), Mapping) else None
        if pin is not None and not (pin == "current" or (isinstance(pin, str) and re.fullmatch(r"[0-9a-f]{64}", pin))):
            raise SpecError(f"{where}: dataset.pin must be a content SHA-256 (64 hex, `facetlake evaluations` --history shows it) "
                            f"or `current` (the content of the evaluation's current fingerprint); got {pin!r}")
        return cls(
            name=str(data["name"]),
            dataset=dict(data.get("dataset") or {"kind": "lm_eval", "task": (data.get("lm_eval") or {}).get("task")}),
            models={str(k): str(v) for k, v in models.items()},
            metrics=[str(m) for m in metrics],
            adapter=adapter,
            generation=generation,
            annotators=[dict(a) for a in data.get("annotators") or []],
            metric_params={str(k): dict(v) for k, v in (data.get("metric_params") or {}).items()},
            runtime=_checked_runtime(data.get("runtime"), where, data.get("budget")),
            baseline=_checked_baseline(data.get("baseline"), models, where),
            cluster=_checked_cluster(data.get("cluster"), where),
            gate=_checked_gate(data.get("gate"), where),
            **dict(zip(("trials", "trial_repeat"), _checked_trials(data.get("trials"), models, where))),
            privacy=_checked_privacy(data.get("privacy"), where),
            profile=str(data["profile"]) if data.get("profile") else None,
            schedule=_checked_schedule(data.get("schedule"), where),
            lm_eval=_checked_lm_eval(data.get("lm_eval"), where),
            review=_checked_review(data.get("review"), where),
        )

    @classmethod
    def from_yaml(cls, path: str | Path) -> "EvaluationSpec":
        """Read a spec from a YAML file; a relative dataset path is taken relative to the file."""
        from resources.datasets import DatasetError, load_yaml, read_text

        path = Path(path)
        try:  # strict UTF-8 (a byte-order mark is dropped): bad bytes are named by line, not a bare UnicodeDecodeError;
            # a regular file of bounded size, aliases bounded anywhere in the document (issue 26, fault 4)
            data = load_yaml(read_text(path, fix="re-save the spec as UTF-8 (it looks like {guess})"), str(path))
        except DatasetError as exc:
            raise SpecError(str(exc)) from None
        except yaml.YAMLError as exc:
            raise SpecError(f"{path}: not valid YAML ({exc})") from None
        spec = cls.from_mapping(data, where=str(path))
        ds_path = spec.dataset.get("path")
        if ds_path and not Path(ds_path).expanduser().is_absolute():
            candidate = (path.parent / ds_path).resolve()
            if candidate.exists():
                spec.dataset["path"] = str(candidate)
        for slug, model in spec.models.items():
            if model.startswith("precomputed:") and not model.startswith("precomputed:column="):
                file = model.split(":", 1)[1]
                candidate = (path.parent / file).resolve()
                if not Path(file).is_absolute() and candidate.exists():
                    spec.models[slug] = f"precomputed:{candidate}"
        include = spec.lm_eval.get("include_path")
        if include:  # task YAML folders relative to the spec file, as dataset paths are
            items = [include] if isinstance(include, str) else list(include)
            spec.lm_eval["include_path"] = [str((path.parent / p).resolve()) if not Path(p).expanduser().is_absolute()
                                            and (path.parent / p).exists() else str(p) for p in items]
        return spec

    def to_mapping(self) -> dict[str, Any]:
        """The spec as plain data (what the evaluations table stores)."""
        return {
            "name": self.name,
            "dataset": self.dataset,
            "models": self.models,
            "metrics": self.metrics,
            "adapter": self.adapter,
            "generation": self.generation,
            "annotators": self.annotators,
            "metric_params": self.metric_params,
            "runtime": self.runtime,
            **({"privacy": self.privacy} if self.privacy else {}),
            **({"profile": self.profile} if self.profile else {}),
            **({"baseline": self.baseline} if self.baseline is not None else {}),
            **({"cluster": self.cluster} if self.cluster is not None else {}),
            **({"gate": self.gate} if self.gate else {}),
            **({"trials": self.trials_mapping()} if self.trials > 1 else {}),
            **({"schedule": self.schedule} if self.schedule else {}),
            **({"lm_eval": self.lm_eval} if self.lm_eval else {}),
            **({"review": self.review} if self.review else {}),
        }

    def trials_mapping(self) -> int | dict[str, Any]:
        """``trials`` as written back: k when a trial repeats both, else ``{k, repeat}``."""
        return self.trials if self.trial_repeat == "both" else {"k": self.trials, "repeat": self.trial_repeat}

    def make_dataset(self) -> Dataset:
        """The configured dataset object (``sha256``, a content pin, is the catalog's concern)."""
        return make_dataset({k: v for k, v in self.dataset.items() if k not in PIN_KEYS})

    def fingerprint_inputs(self, dataset_hash: str) -> dict[str, Any]:
        """Everything that defines this evaluation besides the model (DESIGN.md)."""
        inputs = {
            "dataset_content_sha256": dataset_hash,
            "adapter": self.adapter,
            "generation": self.generation,
            "annotators": self.annotators,
        }
        from resources.prompting.adapters import adapter_fingerprint_inputs  # few-shot pool content hash, adapter version
        from resources.prompting.annotators import make_annotators

        make_annotators(self.annotators)  # a bad annotator fails at registration, not mid-run
        inputs.update(adapter_fingerprint_inputs(self.adapter))
        if self.trials > 1:  # k rows per sample: another evaluation (a single-trial one keeps its fingerprint)
            inputs["trials"] = self.trials_mapping()
        if self.privacy and self.privacy.get("anonymise") not in (None, "off", []):
            # store_raw decides what the lake keeps, not what a model sees
            inputs["privacy"] = {k: v for k, v in self.privacy.items() if k != "store_raw"}
        return inputs


def _checked_schedule(value: Any, where: str) -> str | None:
    """The ``schedule`` cron string (None when absent); refused unless Dagster accepts it."""
    if value in (None, ""):
        return None
    from dagster._utils.schedules import is_valid_cron_string

    if not isinstance(value, str) or not is_valid_cron_string(value):
        raise SpecError(f"{where}: schedule {value!r} is not a cron string; e.g. schedule: \"0 6 * * *\" (daily at 06:00 UTC)")
    return value

def _checked_lm_eval(value: Any, where: str) -> dict[str, Any]:
    """The ``lm_eval`` section, validated (resources/lm_eval/bridge.py); {} when absent."""
    if not value:
        return {}
    from resources.lm_eval.bridge import validate_section

    try:
        return validate_section(value, f"{where}: lm_eval")
    except ValueError as exc:
        raise SpecError(str(exc)) from None


def _checked_privacy(value: Any, where: str) -> dict[str, Any]:
    """The ``privacy`` block, validated (resources/privacy/policy.py); {} when absent."""
    if not value:
        return {}
    from resources.privacy.policy import PrivacyConfigError, validate_privacy

    try:
        return validate_privacy(value, f"{where}: privacy")
    except PrivacyConfigError as exc:
        raise SpecError(str(exc)) from None


def _checked_review(value: Any, where: str) -> dict[str, Any]:
    """The ``review`` block as plain data (empty when absent); see metric_ops/review/rubric.py."""
    from metric_ops.review import ReviewSpecError, parse_review

    try:
        return parse_review(value, where).to_mapping()
    except ReviewSpecError as exc:
        raise SpecError(str(exc)) from None


def _checked_gate(value: Any, where: str) -> dict[str, dict[str, float]]:
    """The ``gate`` rules as plain data (empty when absent); see metric_ops.compare.gates."""
    try:
        return GateRules.from_mapping(value, f"{where}: gate").to_mapping()
    except GateError as exc:
        raise SpecError(str(exc)) from None


#: dataset keys that pin its content (``sha256``: the older name of ``pin``); the loader and source never see them
PIN_KEYS = ("pin", "sha256")


def dataset_pin(dataset: Mapping[str, Any]) -> str | None:
    """A ``dataset`` mapping's content pin (``pin``: SHA-256 hex or ``current``; else ``sha256``); None when unpinned."""
    value = dataset.get("pin", dataset.get("sha256"))
    return None if value in (None, "") else str(value).strip()


MAX_TRIALS = 1000
TRIAL_REPEATS = ("both", "generation", "judging")


def _checked_trials(value: Any, models: Mapping[str, Any], where: str) -> tuple[int, str]:
    """``(k, repeat)`` from ``trials`` ((1, "both") when absent): ``trials: k`` (k in
    1..MAX_TRIALS) repeats generation and judging, each trial's output judged afresh;
    ``trials: {k: 5, repeat: generation}`` repeats generation only (identical outputs share
    one cached judge verdict); ``repeat: judging`` generates once and asks every judged
    metric k times (its trial index in the judge-cache key). A precomputed outputs file holds
    one output per sample, so k > 1 with a ``precomputed:`` model needs ``repeat: judging``."""
    if value is None:
        return 1, "both"
    k, repeat = (value.get("k"), value.get("repeat", "both")) if isinstance(value, Mapping) else (value, "both")
    if isinstance(value, Mapping) and set(value) - {"k", "repeat"}:
        raise SpecError(f"{where}: trials takes k and repeat, e.g. trials: {{k: 5, repeat: judging}}; unknown {sorted(set(value) - {'k', 'repeat'})}")
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= MAX_TRIALS:
        raise SpecError(f"{where}: trials must be a whole number of repeats from 1 to {MAX_TRIALS} "
                        f"(e.g. trials: 5 generates and scores every sample 5 times); got {k!r}")
    if repeat not in TRIAL_REPEATS:
        raise SpecError(f"{where}: trials.repeat {repeat!r} is not one of {', '.join(TRIAL_REPEATS)} "
                        "(generation: new outputs; judging: the same output judged again; both: the default)")
    fixed = sorted(str(m) for m, v in dict(models).items() if str(v).startswith("precomputed:"))
    if k > 1 and fixed and repeat != "judging":
        raise SpecError(f"{where}: trials: {k} repeats generation, but {', '.join(fixed)} read one stored output per sample "
                        "(precomputed:); write trials: {k: N, repeat: judging} to judge each stored output N times, "
                        "evaluate them in a spec without trials, or use a live backend (api:, hf:, vllm:)")
    return k, repeat


def _checked_cluster(value: Any, where: str) -> str | None:
    """The ``cluster`` field name (None when absent): a non-empty string."""
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise SpecError(f"{where}: cluster must name one sample field whose values group the items, e.g. cluster: passage_id "
                        f"(a key of the samples' metadata) or cluster: context; got {value!r}")
    return value.strip()


def _checked_baseline(value: Any, models: Mapping[str, Any], where: str) -> str | None:
    """The ``baseline`` model slug (None when absent); it must be one of ``models``."""
    if value is None:
        return None
    if str(value) not in models:
        raise SpecError(f"{where}: baseline {value!r} is not one of the models ({', '.join(sorted(map(str, models)))}); "
                        "name the model the others are compared against, e.g. baseline: " + sorted(map(str, models))[0])
    return str(value)


def refuse_spec_secrets(data: Any, where: str) -> None:
    """Raise :class:`SpecError` when anything in spec ``data`` looks like a secret
    (:mod:`metric_ops.secrets`: by name and by shape, at any depth); the message names the
    path and the environment variable field to use, never the value. Called before anything
    is stored, so neither a table nor its Delta history ever holds the key."""
    from metric_ops.secrets import refuse_secrets, secret_fix

    refuse_secrets(data, where, fix=secret_fix, error=SpecError)


def _checked_runtime(value: Any, where: str, budget: Any = None) -> dict[str, Any]:
    """The ``runtime`` mapping, endpoint options and budget checked (resources/backends/endpoints.py
    ``checked_runtime``; a top-level ``budget:`` is kept as ``runtime.budget``, out of the fingerprint)."""
    from resources.backends.endpoints import checked_runtime

    if value is not None and not isinstance(value, Mapping):
        raise SpecError(f"{where}: runtime must be a mapping, e.g. {{batch_size: 8, concurrency: 4}}")
    return checked_runtime(dict(value or {}), budget, where, error=SpecError)


@dataclass
class ResolvedEvaluation:
    """A spec with its loaded samples, dataset hash and fingerprint."""

    spec: EvaluationSpec
    samples: list[Sample]
    dataset_hash: str
    fingerprint: str
    dataset_name: str
    # what registering it did (resources.catalog.Registration), set by pipelines.runs.register.register
    registration: Any = None
    # what an in-process run reused instead of computing again, one line each (pipelines.runs.runner.run_evaluation)
    reused: list[str] = field(default_factory=list)

    @property
    def fingerprint_inputs(self) -> dict[str, Any]:
        """The inputs the fingerprint was computed from."""
        return self.spec.fingerprint_inputs(self.dataset_hash)


_HANDED_OFF: dict[tuple, tuple[list[Sample], str]] = {}


def _dataset_state(dataset: Dataset) -> tuple | None:
    """(configuration, file, size, modification time) of a dataset read from one file; None
    for one that is not (nothing is handed off for it)."""
    try:
        path = dataset.resolved_path()
        st = path.stat()
    except (FacetlakeError, OSError):
        return None
    return json.dumps(dataset.config(), sort_keys=True, default=str), str(path.resolve()), st.st_size, st.st_mtime_ns


def load_dataset(dataset: Dataset, keep: bool = False) -> tuple[list[Sample], str]:
    """``(samples, content hash)`` of ``dataset``.

    ``keep``: hold them for this process's next load of the same dataset in the same file
    state, which takes them instead of reading, normalising and hashing the file again:
    ``facetlake run`` registers the evaluation (and so loads the dataset) and its samples
    asset then loads it again in the same process (issue 14; 0.6 s at 30,000 rows). The
    asset still compares the hash with the registered one, so a file changed in between is
    read again and refused."""
    key = _dataset_state(dataset)
    loaded = _HANDED_OFF.pop(key, None) if key is not None else None
    if loaded is None:
        samples = dataset.load()
        loaded = (samples, content_hash(samples))
    if keep and key is not None:
        _HANDED_OFF.clear()  # one dataset at a time
        _HANDED_OFF[key] = loaded
    return loaded


def resolve(spec: EvaluationSpec, keep: bool = False) -> ResolvedEvaluation:
    """Load the dataset, hash its content and compute the fingerprint (``keep``: hand the
    loaded samples to this process's samples asset, :func:`load_dataset`)."""
    dataset = spec.make_dataset()
    samples, digest = load_dataset(dataset, keep=keep)
    return ResolvedEvaluation(
        spec=spec,
        samples=samples,
        dataset_hash=digest,
        fingerprint=fingerprint_of(spec.fingerprint_inputs(digest)),
        dataset_name=dataset.display_name,
    )
