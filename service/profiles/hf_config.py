"""The parameter count of a Hugging Face model from the config its Trainer logs as params,
for the common decoder families. Counted as transformers' own
`num_parameters(exclude_embeddings=True)` does: every weight but the `nn.Embedding` ones
(token embeddings; GPT-2's position embeddings), so an untied output projection counts and a
tied one does not. This is the N of HF's `total_flos` (6 × N × tokens), so tokens follow
from `total_flos` when the run counted none. Pure; None for a family or a config it cannot
read (never a guess)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class _Config:
    values: Mapping[str, str]

    def whole(self, *names: str, default: int | None = None) -> int:
        for name in names:
            text = self.values.get(name)
            if text not in (None, "", "None"):
                value = float(str(text))
                if value != int(value) or value < 0:
                    raise ValueError(f"{name} = {text!r}")
                return int(value)
        if default is None:
            raise ValueError(f"no {' or '.join(names)}")
        return default

    def flag(self, name: str, default: bool) -> bool:
        text = str(self.values.get(name, "")).strip().lower()
        if text in ("true", "1"):
            return True
        if text in ("false", "0"):
            return False
        return default


def _gated_decoder(config: _Config, *, qkv_bias: bool, tied: bool = False) -> int:
    """Llama, Mistral, Qwen2, Gemma: grouped-query attention, a gated MLP, RMS norms."""
    d = config.whole("hidden_size")
    layers = config.whole("num_hidden_layers")
    heads = config.whole("num_attention_heads")
    kv_heads = config.whole("num_key_value_heads", default=heads)
    head_dim = config.whole("head_dim", default=d // heads)
    inner = config.whole("intermediate_size")
    bias = qkv_bias or config.flag("attention_bias", False)
    attention = d * heads * head_dim + 2 * d * kv_heads * head_dim + heads * head_dim * d
    if bias:
        attention += heads * head_dim + 2 * kv_heads * head_dim
        if not qkv_bias:  # Llama's attention_bias also biases the output projection
            attention += d
    mlp = 3 * d * inner + (2 * inner + d if config.flag("mlp_bias", False) else 0)
    per_layer = attention + mlp + 2 * d
    return layers * per_layer + d + _head(config, d, tied=tied)


def _head(config: _Config, d: int, *, tied: bool, bias: bool = False) -> int:
    """The output projection, counted when it is not the (tied) token embedding; `tied` is
    the family's default when the config does not say."""
    if config.flag("tie_word_embeddings", tied):
        return 0
    vocab = config.whole("vocab_size")
    return vocab * d + (vocab if bias else 0)


def _gpt2(config: _Config) -> int:
    d = config.whole("n_embd", "hidden_size")
    layers = config.whole("n_layer", "num_hidden_layers")
    inner = config.whole("n_inner", default=4 * d)
    per_layer = (d * 3 * d + 3 * d) + (d * d + d) + (d * inner + inner) + (inner * d + d) + 4 * d
    return layers * per_layer + 2 * d + _head(config, d, tied=True)


def _gpt_neox(config: _Config) -> int:
    d = config.whole("hidden_size")
    layers = config.whole("num_hidden_layers")
    inner = config.whole("intermediate_size")
    bias = config.flag("attention_bias", True)
    attention = d * 3 * d + d * d + (3 * d + d if bias else 0)
    per_layer = attention + (d * inner + inner) + (inner * d + d) + 4 * d
    untied = not config.flag("tie_word_embeddings", False)
    return layers * per_layer + 2 * d + (config.whole("vocab_size") * d if untied else 0)


def _phi(config: _Config) -> int:
    d = config.whole("hidden_size")
    layers = config.whole("num_hidden_layers")
    heads = config.whole("num_attention_heads")
    kv_heads = config.whole("num_key_value_heads", default=heads)
    head_dim = d // heads
    inner = config.whole("intermediate_size")
    attention = (d * heads * head_dim + heads * head_dim) + 2 * (
        d * kv_heads * head_dim + kv_heads * head_dim
    )
    attention += heads * head_dim * d + d  # the dense output projection, with its bias
    per_layer = attention + (d * inner + inner) + (inner * d + d) + 2 * d
    return layers * per_layer + 2 * d + _head(config, d, tied=False, bias=True)


_FAMILIES: dict[str, Callable[[_Config], int]] = {
    "llama": lambda c: _gated_decoder(c, qkv_bias=False),
    "mistral": lambda c: _gated_decoder(c, qkv_bias=False),
    "qwen2": lambda c: _gated_decoder(c, qkv_bias=True),
    "gemma": lambda c: _gated_decoder(c, qkv_bias=False, tied=True),
    "gpt2": _gpt2,
    "gpt_neox": _gpt_neox,
    "phi": _phi,
}
FAMILIES = tuple(_FAMILIES)


def non_embedding_parameters(params: Mapping[str, str]) -> int | None:
    """N without embeddings for a logged config of a known family, else None."""
    family = str(params.get("model_type", "")).strip()
    count = _FAMILIES.get(family)
    if count is None:
        return None
    try:
        return count(_Config(params))
    except (ValueError, ZeroDivisionError, OverflowError):
        return None
