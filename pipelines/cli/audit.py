"""Audit and privacy commands: ``export``, ``verify``, ``profiles``, ``anonymise``, and the
``run`` options ``--offline``, ``--anonymise``, ``--profile`` (resolved here).

Its ``app`` is merged into the main ``facetlake`` app by pipelines/cli/__init__.py.
"""

from __future__ import annotations

import os
import warnings
from enum import Enum
from pathlib import Path
from typing import Optional

import typer

from pipelines.cli.common import (
    EvaluationOption, FormatOption, LakeOption, OutputFormat, console, err, fail, open_lake, print_frame, refresh_stale_verdicts,
)

app = typer.Typer(rich_markup_mode="markdown")


class EvidenceFormat(str, Enum):
    json = "json"
    csv = "csv"


def _show_warnings(caught: list[warnings.WarningMessage]) -> None:
    for w in caught:
        err.print(f"[yellow]warning:[/] {w.message}")


def spec_for_run(config: Path, offline: bool = False, anonymise: Optional[str] = None, profile: Optional[str] = None,
                 in_process: bool = False, budget: Optional[str] = None):
    """The evaluation spec of ``facetlake run`` with its command-line options applied.

    ``offline`` sets ``FACETLAKE_OFFLINE=1`` for this process and lists what will be
    refused; ``anonymise`` replaces the spec's ``privacy.anonymise``; ``profile`` adds the
    profile's metrics (warning for a dimension with fewer than two); ``budget``
    (``usd=5,tokens=2000000,calls=10000``) replaces the spec's ``budget:``; ``in_process``: the
    run follows in this process, which keeps the checked outputs files for it. Bad input
    exits with a message naming it.
    """
    from metric_ops.registry import REGISTRY
    from resources.backends import BACKENDS, parse_model_spec
    from resources.catalog.spec import EvaluationSpec, SpecError
    from resources.privacy.policy import PrivacyConfigError, resolve_policy, validate_privacy
    from resources.catalog.profiles import ProfileError, profile_metrics

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            spec = EvaluationSpec.from_yaml(config)
            if anonymise is not None:
                spec.privacy = validate_privacy({**spec.privacy, "anonymise": anonymise}, "--anonymise")
            if profile:
                spec.metrics = profile_metrics(profile, spec.metrics, spec.metric_params, where="--profile")
                spec.profile = profile
            if budget is not None:
                from resources.backends.budget import Budget, EndpointError

                try:
                    parsed = Budget.parse(budget, "--budget")
                except EndpointError as exc:
                    raise SpecError(str(exc)) from None
                spec.runtime = {**spec.runtime, "budget": parsed.limits() if parsed else None}
            policy = resolve_policy(spec.privacy)
        except (SpecError, PrivacyConfigError, ProfileError) as exc:
            fail(str(exc))
    _show_warnings(caught)
    _check_precomputed_files(spec, keep=in_process)
    if policy.active:
        console.print(f"outbound anonymisation: {policy.label}" + (f" (forced by administrator: {','.join(policy.forced)})" if policy.forced else ""))
    if offline or os.environ.get("FACETLAKE_OFFLINE", "").lower() in ("1", "true", "yes"):
        refused, external_models = [], []
        for slug, model_spec in spec.models.items():
            kind, _ = parse_model_spec(model_spec)
            if kind in BACKENDS and BACKENDS[kind].locality == "external":
                external_models.append(f"{slug} ({model_spec.split('@', 1)[0]})")
        if external_models:
            # refused here, before any run: one line instead of the failed runs' stack traces
            fail(f"offline mode is on: model {', '.join(external_models)} would call an external service, so nothing "
                  "was run; drop --offline (or unset FACETLAKE_OFFLINE), or remove that model from the spec")
        os.environ["FACETLAKE_OFFLINE"] = "1"  # for this process's run, once nothing is refused
        for name in spec.metrics:
            if name in REGISTRY:
                try:
                    metric = REGISTRY.create(name, **spec.metric_params.get(name, {}))
                except Exception:  # noqa: BLE001 - the scores asset reports a bad metric config
                    continue
                if metric.locality == "external":
                    refused.append(f"metric {name}")
        console.print("offline mode: external metrics and backends are refused before any connection"
                      + (f"; refused here: {', '.join(refused)}" if refused else "; everything in this run is local"))
    return spec


def _check_precomputed_files(spec, keep: bool = False) -> None:
    """Read every ``precomputed:FILE`` model's outputs file now, so a bad file (bytes that
    are not UTF-8, malformed rows, no rows, a repeated sample id) is refused in one line
    before any Dagster run (``keep``: for this process's run to take, not parse again)."""
    from resources.agents.episodes import EpisodesDataset, check_episodes_file
    from resources.backends import BackendError, ModelSpecError, PrecomputedBackend
    from resources.datasets import DatasetError

    # the file is read as what the dataset kind makes of it: an agent evaluation's models are
    # episodes files, every other kind's are generation outputs (issue 26, fault 9)
    agent = (spec.dataset or {}).get("kind") == EpisodesDataset.kind
    for slug, model_spec in spec.models.items():
        if model_spec.startswith("precomputed:") and not model_spec.startswith("precomputed:column="):
            try:
                if agent:
                    check_episodes_file(model_spec.split(":", 1)[1])
                else:
                    PrecomputedBackend(model_spec).check_file(keep=keep)
            except (BackendError, ModelSpecError, DatasetError) as exc:
                fail(f"model {slug}: {exc}")


def after_run(spec, lake) -> None:
    """Show the profile's output form after ``facetlake run`` (nothing without a profile)."""
    from resources.catalog import find_evaluation
    from resources.catalog.profiles import load_profile, profile_view

    if not spec.profile:
        return
    row = find_evaluation(lake, spec.name)
    if row is None:
        return
    prof = load_profile(spec.profile)
    print_frame(profile_view(lake, [row["fingerprint"]], prof), title=f"{prof.title}: {prof.form}")
    if prof.form == "evidence":
        console.print(f"evidence export: facetlake export -e {spec.name} --out evidence-{spec.name}")


@app.command()
def export(
    fingerprint: str = EvaluationOption(required=True, help="Evaluation to export: name (or unique prefix), fingerprint, or name@fp12."),
    out: Path = typer.Option(..., "--out", help="New or empty folder for the evidence."),
    format: EvidenceFormat = typer.Option(EvidenceFormat.json, "--format", help="json (JSON lines) or csv (opens in a spreadsheet)."),
    include_samples: bool = typer.Option(False, "--include-samples", help="Also export the samples (raw dataset text) so the dataset hash can be rechecked."),
    key: Optional[Path] = typer.Option(None, "--key", help="Ed25519 private key (PEM) to sign the manifest. Default: $FACETLAKE_EVIDENCE_KEY (PEM text) or the file $FACETLAKE_EVIDENCE_KEY_FILE. Never keep it in the lake.", show_default=False),
    unsigned: bool = typer.Option(False, "--unsigned", help="Export without a signature (verify then needs --allow-unsigned: hashes alone do not stop a rewrite)."),
    lake: Optional[str] = LakeOption,
) -> None:
    """Write a portable audit artifact: scores with status, metric signatures, judge reasoning,
    model identities, fingerprint inputs, package versions, the outbound ledger, a SHA-256
    manifest signed with Ed25519, and the manifest's hash anchored in the lake (evidence_exports)."""
    from resources.catalog import CatalogError, evaluation_row
    from resources.evidence.keys import KEY_FILE_ENV, EvidenceError, load_signing_key
    from resources.evidence.export import export_evidence

    store = open_lake(lake)
    if not store.exists("evaluations"):
        fail(f"no evaluations under {store.root}; run `facetlake run CONFIG` first or pass --lake")
    try:
        signing_key = None if unsigned and key is None else load_signing_key(key, store.root)
        if signing_key is None and not unsigned:
            fail(f"no signing key: create one with `facetlake keygen --out DIR`, then pass --key DIR/facetlake-evidence.key "
                  f"or set {KEY_FILE_ENV}; or export with --unsigned")
        refresh_stale_verdicts(store, [evaluation_row(store, fingerprint)["fingerprint"]])  # the summary exported is that of its scores
        manifest = export_evidence(store, fingerprint, out, format.value, include_samples, signing_key=signing_key)
    except (CatalogError, EvidenceError) as exc:
        fail(str(exc))
    console.print(f"evidence for fingerprint {manifest['fingerprint']} written to {out} ({len(manifest['files'])} files + MANIFEST.json)",
                  markup=False, highlight=False)
    console.print(f"manifest SHA-256 {manifest['manifest_sha256']} (anchored in the lake's evidence_exports)", markup=False, highlight=False)
    if manifest["signing"]:
        console.print(f"signed with Ed25519 key {manifest['signing']['public_key_sha256']}", markup=False, highlight=False)
        console.print(f"check it with: facetlake verify {out} --public-key PUBLIC_KEY.pub --lake {store.root}", markup=False, highlight=False)
    else:
        console.print(f"[yellow]unsigned[/]: check it with: facetlake verify {out} --allow-unsigned --lake {store.root}")


@app.command()
def verify(
    folder: Path = typer.Argument(..., exists=True, file_okay=False, help="An evidence folder written by `facetlake export`."),
    public_key: Optional[Path] = typer.Option(None, "--public-key", help="The trusted Ed25519 public key (PEM). Default: $FACETLAKE_EVIDENCE_PUBLIC_KEY (PEM text) or the file $FACETLAKE_EVIDENCE_PUBLIC_KEY_FILE.", show_default=False),
    lake: Optional[str] = typer.Option(None, "--lake", help="Also check that the manifest's hash is anchored in this lake's evidence_exports, and that the table versions it lists are in the lake's history and hold the exported scores.", show_default=False),
    allow_unsigned: bool = typer.Option(False, "--allow-unsigned", help="Accept an unsigned export (consistency checks only; a consistent rewrite goes unnoticed)."),
) -> None:
    """Check the signature against a public key, every file's SHA-256, the fingerprint from its
    inputs, the summary and models against the scores, and (with --lake) the anchor; exit 1 unless intact."""
    from resources.evidence.keys import EvidenceError, load_public_key
    from resources.evidence.verify import verify_evidence

    try:
        trusted = load_public_key(public_key)
    except EvidenceError as exc:
        fail(str(exc))
    report = verify_evidence(folder, public_key=trusted, lake=open_lake(lake) if lake else None, allow_unsigned=allow_unsigned)
    if report.ok:
        how = f"signature by key {report.key_id} verified" if report.signature_ok else "UNSIGNED (consistency only)"
        console.print(f"[bold green]intact[/]: {how}; {report.files_checked} files match the manifest; "
                      f"fingerprint {report.fingerprint} recomputed from its inputs"
                      + ("; manifest anchored in the lake" if report.anchored else ""))
        console.print(f"MANIFEST.json SHA-256 {report.manifest_sha256}", markup=False, highlight=False)
        return
    from rich.text import Text

    for problem in report.problems:
        err.print(Text.assemble(("problem:", "bold red"), f" {problem}"))
    err.print(Text.assemble(("NOT intact", "bold red"), f": {len(report.problems)} problem(s) in {folder}"))
    raise typer.Exit(code=1)


@app.command()
def keygen(
    out: Path = typer.Option(..., "--out", help="Folder for the key pair (outside the lake; the private key gets mode 0600)."),
    name: str = typer.Option("facetlake-evidence", "--name", help="File name stem: NAME.key (private) and NAME.pub (public)."),
    lake: Optional[str] = LakeOption,
) -> None:
    """Create an Ed25519 key pair for signing evidence exports (`export --key`, `verify --public-key`).

    Encrypts the private key when $FACETLAKE_EVIDENCE_KEY_PASSPHRASE is set. Refuses a folder
    inside the lake and never overwrites a key."""
    from resources.evidence.keys import PASSPHRASE_ENV, EvidenceError, _inside, generate_keypair

    store = open_lake(lake)
    if _inside(out, store.root):
        fail(f"{out} is inside the lake {store.root}; keep signing keys outside the lake")
    try:
        private, public, key_id = generate_keypair(out, name, os.environ.get(PASSPHRASE_ENV) or None)
    except EvidenceError as exc:
        fail(str(exc))
    console.print(f"private key: {private} (keep it secret; export --key {private}, or FACETLAKE_EVIDENCE_KEY_FILE)", markup=False, highlight=False)
    console.print(f"public key:  {public} (give it to whoever verifies: verify --public-key {public})", markup=False, highlight=False)
    console.print(f"key id (SHA-256 of the public key): {key_id}", markup=False, highlight=False)


@app.command()
def profiles(format: OutputFormat = FormatOption()) -> None:
    """List practitioner profiles (shipped and from $FACETLAKE_PROFILES): dimensions, metrics, output form."""
    import polars as pl

    from resources.catalog.profiles import list_profiles

    rows = [{"profile": p.name, "dimensions": ", ".join(p.dimensions), "metrics": ", ".join(p.metrics),
             "judged (with a judge)": ", ".join(p.judged_metrics), "output": p.form, "file": p.source}
            for p in list_profiles().values()]
    print_frame(pl.DataFrame(rows), format, title="practitioner profiles")


@app.command()
def anonymise(
    text: str = typer.Argument(..., help="Text to anonymise (nothing is sent anywhere unless the strategy is model)."),
    strategy: str = typer.Option("auto", "--strategy", help="auto (the strongest installed: ner, else presidio with a trained "
                                 "spaCy pipeline, else rule_based), ner, rule_based, presidio, model, off, or a comma list."),
) -> None:
    """Show what the outbound path would send for TEXT under a strategy, with entity counts
    and the strategy that ran (on stderr, so stdout is only the anonymised text)."""
    from resources.privacy.anonymise import AnonymisationError, strongest_strategy
    from resources.privacy.outbound import model_anonymiser_call
    from resources.privacy.policy import PrivacyConfigError, resolve_policy

    try:
        policy = resolve_policy({"anonymise": strategy})
        result = policy.anonymiser(model_call=model_anonymiser_call).anonymise(text) if policy.active else None
    except (PrivacyConfigError, AnonymisationError, ValueError) as exc:
        fail(str(exc))
    why = ""
    if "auto" in [s.strip() for s in strategy.split(",")]:
        why = f" (auto: {strongest_strategy()[1]})"
    if result is None:
        console.print(text, markup=False, highlight=False, soft_wrap=True)
        err.print(f"strategy: {policy.label}{why}", markup=False, highlight=False, soft_wrap=True)
        return
    console.print(result.text, markup=False, highlight=False, soft_wrap=True)  # never wrapped: it is the text to send
    counts = ", ".join(f"{k} {v}" for k, v in sorted(result.counts.items())) or "nothing found"
    err.print(f"strategy: {policy.label}{why}; {counts}", markup=False, highlight=False, soft_wrap=True)
