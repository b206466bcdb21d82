"""Parameter counts of real decoder configs, as transformers computes them, into model_configs.json.

    venvs/hf/bin/python scripts/model_param_counts.py

Nothing can be downloaded from the Hub here, so each model's published config.json hyperparameters
are written out below by hand; transformers' own config class builds the config (legacy keys such
as rope_theta / rotary_pct are converted by the class, as when a published config.json is loaded),
`config.to_dict()` is what is stored, and the model is built on the meta device (no memory, no
weights) to ask `num_parameters()` and `num_parameters(exclude_embeddings=True)`.
exclude_embeddings drops nn.Embedding weights only (token and learned position embeddings); an
untied lm_head is an nn.Linear and stays in.
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

# (family, name, config class, published hyperparameters)
MODELS = [
    ("llama", "meta-llama/Meta-Llama-3-8B", "LlamaConfig", dict(
        architectures=["LlamaForCausalLM"], vocab_size=128256, hidden_size=4096, intermediate_size=14336,
        num_hidden_layers=32, num_attention_heads=32, num_key_value_heads=8, hidden_act="silu",
        max_position_embeddings=8192, rms_norm_eps=1e-5, rope_theta=500000.0, attention_bias=False,
        tie_word_embeddings=False, bos_token_id=128000, eos_token_id=128001, dtype="bfloat16")),
    ("llama", "meta-llama/Llama-3.2-1B", "LlamaConfig", dict(
        architectures=["LlamaForCausalLM"], vocab_size=128256, hidden_size=2048, intermediate_size=8192,
        num_hidden_layers=16, num_attention_heads=32, num_key_value_heads=8, head_dim=64, hidden_act="silu",
        max_position_embeddings=131072, rms_norm_eps=1e-5, rope_theta=500000.0,
        rope_scaling={"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                      "original_max_position_embeddings": 8192},
        tie_word_embeddings=True, bos_token_id=128000, eos_token_id=128001, dtype="bfloat16")),
    ("llama", "meta-llama/Llama-2-7b-hf", "LlamaConfig", dict(
        architectures=["LlamaForCausalLM"], vocab_size=32000, hidden_size=4096, intermediate_size=11008,
        num_hidden_layers=32, num_attention_heads=32, num_key_value_heads=32, hidden_act="silu",
        max_position_embeddings=4096, rms_norm_eps=1e-5, tie_word_embeddings=False,
        bos_token_id=1, eos_token_id=2, dtype="float16")),
    ("llama", "TinyLlama/TinyLlama-1.1B-intermediate-step-1431k-3T", "LlamaConfig", dict(
        architectures=["LlamaForCausalLM"], vocab_size=32000, hidden_size=2048, intermediate_size=5632,
        num_hidden_layers=22, num_attention_heads=32, num_key_value_heads=4, hidden_act="silu",
        max_position_embeddings=2048, rms_norm_eps=1e-5, rope_theta=10000.0, tie_word_embeddings=False,
        bos_token_id=1, eos_token_id=2, dtype="float32")),
    ("mistral", "mistralai/Mistral-7B-v0.1", "MistralConfig", dict(
        architectures=["MistralForCausalLM"], vocab_size=32000, hidden_size=4096, intermediate_size=14336,
        num_hidden_layers=32, num_attention_heads=32, num_key_value_heads=8, hidden_act="silu",
        max_position_embeddings=32768, rms_norm_eps=1e-5, rope_theta=10000.0, sliding_window=4096,
        tie_word_embeddings=False, bos_token_id=1, eos_token_id=2, dtype="bfloat16")),
    ("qwen2", "Qwen/Qwen2-7B", "Qwen2Config", dict(
        architectures=["Qwen2ForCausalLM"], vocab_size=152064, hidden_size=3584, intermediate_size=18944,
        num_hidden_layers=28, num_attention_heads=28, num_key_value_heads=4, hidden_act="silu",
        max_position_embeddings=131072, rms_norm_eps=1e-6, rope_theta=1000000.0, use_sliding_window=False,
        sliding_window=131072, max_window_layers=28, tie_word_embeddings=False,
        bos_token_id=151643, eos_token_id=151643, dtype="bfloat16")),
    ("qwen2", "Qwen/Qwen2.5-0.5B", "Qwen2Config", dict(
        architectures=["Qwen2ForCausalLM"], vocab_size=151936, hidden_size=896, intermediate_size=4864,
        num_hidden_layers=24, num_attention_heads=14, num_key_value_heads=2, hidden_act="silu",
        max_position_embeddings=32768, rms_norm_eps=1e-6, rope_theta=1000000.0, use_sliding_window=False,
        sliding_window=32768, max_window_layers=24, tie_word_embeddings=True,
        bos_token_id=151643, eos_token_id=151643, dtype="bfloat16")),
    ("gemma", "google/gemma-2b", "GemmaConfig", dict(
        architectures=["GemmaForCausalLM"], vocab_size=256000, hidden_size=2048, intermediate_size=16384,
        num_hidden_layers=18, num_attention_heads=8, num_key_value_heads=1, head_dim=256,
        hidden_act="gelu_pytorch_tanh", max_position_embeddings=8192, rms_norm_eps=1e-6, rope_theta=10000.0,
        tie_word_embeddings=True, pad_token_id=0, bos_token_id=2, eos_token_id=1, dtype="bfloat16")),
    ("gemma", "google/gemma-7b", "GemmaConfig", dict(
        architectures=["GemmaForCausalLM"], vocab_size=256000, hidden_size=3072, intermediate_size=24576,
        num_hidden_layers=28, num_attention_heads=16, num_key_value_heads=16, head_dim=256,
        hidden_act="gelu_pytorch_tanh", max_position_embeddings=8192, rms_norm_eps=1e-6, rope_theta=10000.0,
        tie_word_embeddings=True, pad_token_id=0, bos_token_id=2, eos_token_id=1, dtype="bfloat16")),
    ("gpt2", "openai-community/gpt2", "GPT2Config", dict(
        architectures=["GPT2LMHeadModel"], vocab_size=50257, n_positions=1024, n_embd=768, n_layer=12,
        n_head=12, activation_function="gelu_new", resid_pdrop=0.1, embd_pdrop=0.1, attn_pdrop=0.1,
        layer_norm_epsilon=1e-5, bos_token_id=50256, eos_token_id=50256)),
    ("gpt2", "openai-community/gpt2-xl", "GPT2Config", dict(
        architectures=["GPT2LMHeadModel"], vocab_size=50257, n_positions=1024, n_embd=1600, n_layer=48,
        n_head=25, activation_function="gelu_new", resid_pdrop=0.1, embd_pdrop=0.1, attn_pdrop=0.1,
        layer_norm_epsilon=1e-5, bos_token_id=50256, eos_token_id=50256)),
    ("gpt_neox", "EleutherAI/pythia-160m", "GPTNeoXConfig", dict(
        architectures=["GPTNeoXForCausalLM"], vocab_size=50304, hidden_size=768, intermediate_size=3072,
        num_hidden_layers=12, num_attention_heads=12, hidden_act="gelu", max_position_embeddings=2048,
        layer_norm_eps=1e-5, rotary_pct=0.25, rotary_emb_base=10000, use_parallel_residual=True,
        tie_word_embeddings=False, bos_token_id=0, eos_token_id=0, dtype="float16")),
    ("gpt_neox", "EleutherAI/pythia-1.4b", "GPTNeoXConfig", dict(
        architectures=["GPTNeoXForCausalLM"], vocab_size=50304, hidden_size=2048, intermediate_size=8192,
        num_hidden_layers=24, num_attention_heads=16, hidden_act="gelu", max_position_embeddings=2048,
        layer_norm_eps=1e-5, rotary_pct=0.25, rotary_emb_base=10000, use_parallel_residual=True,
        tie_word_embeddings=False, bos_token_id=0, eos_token_id=0, dtype="float16")),
    ("phi", "microsoft/phi-2", "PhiConfig", dict(
        architectures=["PhiForCausalLM"], vocab_size=51200, hidden_size=2560, intermediate_size=10240,
        num_hidden_layers=32, num_attention_heads=32, num_key_value_heads=32, hidden_act="gelu_new",
        max_position_embeddings=2048, layer_norm_eps=1e-5, partial_rotary_factor=0.4, rope_theta=10000.0,
        resid_pdrop=0.1, embd_pdrop=0.0, attention_dropout=0.0, qk_layernorm=False,
        tie_word_embeddings=False, bos_token_id=50256, eos_token_id=50256, dtype="float16")),
    ("phi", "microsoft/phi-1_5", "PhiConfig", dict(
        architectures=["PhiForCausalLM"], vocab_size=51200, hidden_size=2048, intermediate_size=8192,
        num_hidden_layers=24, num_attention_heads=32, num_key_value_heads=32, hidden_act="gelu_new",
        max_position_embeddings=2048, layer_norm_eps=1e-5, partial_rotary_factor=0.5, rope_theta=10000.0,
        resid_pdrop=0.0, embd_pdrop=0.0, attention_dropout=0.0, qk_layernorm=False,
        tie_word_embeddings=False, bos_token_id=1, eos_token_id=2, dtype="float16")),
]


def main():
    import torch
    import transformers
    from transformers import AutoModelForCausalLM
    out = []
    for family, name, cls_name, hp in MODELS:
        cfg = getattr(transformers, cls_name)(**hp)
        assert cfg.model_type == family, (name, cfg.model_type)
        with torch.device("meta"):
            model = AutoModelForCausalLM.from_config(cfg)
        entry = {"family": family, "name": name, "config": cfg.to_dict(),
                 "num_parameters": model.num_parameters(),
                 "num_parameters_exclude_embeddings": model.num_parameters(exclude_embeddings=True),
                 "transformers_version": transformers.__version__, "torch_version": torch.__version__}
        out.append(entry)
        print(f"{family:9s} {name:55s} {entry['num_parameters']:>15,d} {entry['num_parameters_exclude_embeddings']:>15,d}"
              f"  {type(model).__name__}", flush=True)
        del model
    path = os.path.join(common.CAPTURE_DIR, "model_configs.json")
    with open(path, "w") as f:
        json.dump(out, f, indent=1, default=str)
        f.write("\n")
    print(f"wrote {common.rel(path)}: {len(out)} configs")


if __name__ == "__main__":
    main()
