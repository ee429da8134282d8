"""A tiny causal LM for tests: a byte-level BPE tokenizer trained (``tokenizers``) on the
shipped SF-RES references plus a 2-layer Llama from a transformers config, random weights
(seeded). It exercises the real generation, chat-template, log-probability and serving
code paths; its outputs are gibberish by design.
"""

from __future__ import annotations

import functools
import json
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CHAT_TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)


def corpus() -> list[str]:
    """Local text: SF-RES references and sources (data/unieval/sfres.json, MIT)."""
    path = ROOT / "data" / "unieval" / "sfres.json"
    if not path.exists():
        path = ROOT.parent / "shared" / "data" / "unieval" / "sfres.json"
    rows = json.loads(path.read_text(encoding="utf-8"))
    return [r["reference"] for r in rows] + [r["source"] for r in rows]


@functools.lru_cache(maxsize=1)
def build_tiny_lm() -> str:
    """Build the tiny model once per process; returns the folder it is saved in."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    out = Path(tempfile.mkdtemp(prefix="facetlake-tiny-lm-"))
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=400, special_tokens=["<unk>", "<s>", "</s>", "<pad>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(corpus(), trainer=trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", pad_token="<pad>", unk_token="<unk>")
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(out)
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=len(fast), hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
        num_key_value_heads=2, max_position_embeddings=512, bos_token_id=fast.bos_token_id,
        eos_token_id=fast.eos_token_id, pad_token_id=fast.pad_token_id, tie_word_embeddings=True,
    )
    model = LlamaForCausalLM(config)
    with torch.no_grad():  # sharper logits than the default init, so greedy picks are stable
        model.lm_head.weight.mul_(4.0)
    model.save_pretrained(out)
    return str(out)
