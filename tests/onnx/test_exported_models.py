"""Small real models exported by ``torch.onnx.export``'s default exporter (torch.export and
onnxscript: opset 18 on, decomposed or fused layer norms and attention, If for torch.cond) and,
where its graph differs in a way that matters, by the TorchScript one (``dynamo=False``: Shape
arithmetic, Constant nodes, model-local functions); each runs through gingham.onnx on every
device and is compared with PyTorch and with onnxruntime.

Each model is tiny (its compile is short) and exported once per run; a case runs its inputs in
turn, a model with a dynamic batch at a second batch size too.
"""

from __future__ import annotations

import functools
import io
import math
import warnings

import pytest
import torch
from torch import nn
from torch.nn import functional as F

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
pytest.importorskip("onnxscript")

import gingham.onnx  # noqa: E402
import ort_oracle  # noqa: E402


def _basic_block(cin: int, cout: int, stride: int) -> nn.Module:
    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
            self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
            self.bn1, self.bn2 = nn.BatchNorm2d(cout), nn.BatchNorm2d(cout)
            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                      nn.BatchNorm2d(cout))

        def forward(self, x):
            y = self.bn2(self.conv2(F.relu(self.bn1(self.conv1(x)))))
            return F.relu(y + self.down(x))
    return Block()


class ResNet(nn.Module):
    """ResNet-18's stem and a downsampling basic block."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 4, 7, 2, 3, bias=False), nn.BatchNorm2d(4),
                                  nn.ReLU(), nn.MaxPool2d(3, 2, 1))
        self.block, self.fc = _basic_block(4, 8, 2), nn.Linear(8, 5)

    def forward(self, x):
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(self.block(self.stem(x)), 1), 1))


class MobileBlocks(nn.Module):
    """MobileNetV2's inverted residual (expand, depthwise 3x3, project; ReLU6) and
    EfficientNet's MBConv (SiLU, a 5x5 depthwise convolution, squeeze-and-excitation)."""

    def __init__(self, c: int = 4, expand: int = 2) -> None:
        super().__init__()
        h = c * expand
        self.inverted = nn.Sequential(
            nn.Conv2d(c, h, 1, bias=False), nn.BatchNorm2d(h), nn.ReLU6(),
            nn.Conv2d(h, h, 3, 1, 1, groups=h, bias=False), nn.BatchNorm2d(h), nn.ReLU6(),
            nn.Conv2d(h, c, 1, bias=False), nn.BatchNorm2d(c))
        self.expand = nn.Sequential(nn.Conv2d(c, h, 1), nn.BatchNorm2d(h), nn.SiLU())
        self.depthwise = nn.Sequential(nn.Conv2d(h, h, 5, 1, 2, groups=h), nn.SiLU())
        self.squeeze, self.excite = nn.Conv2d(h, 2, 1), nn.Conv2d(2, h, 1)
        self.project = nn.Conv2d(h, c, 1)

    def forward(self, x):
        x = x + self.inverted(x)
        y = self.depthwise(self.expand(x))
        scale = torch.sigmoid(self.excite(F.silu(self.squeeze(F.adaptive_avg_pool2d(y, 1)))))
        return x + self.project(y * scale)


class UNet(nn.Module):
    """One level down and up: max pooling, a transposed convolution, a skip concatenation,
    a bilinear interpolate."""

    def __init__(self) -> None:
        super().__init__()
        self.enc, self.mid = nn.Conv2d(1, 4, 3, padding=1), nn.Conv2d(4, 4, 3, padding=1)
        self.up = nn.ConvTranspose2d(4, 4, 2, stride=2)
        self.dec, self.out = nn.Conv2d(8, 4, 3, padding=1), nn.Conv2d(8, 2, 1)

    def forward(self, x):
        e = F.relu(self.enc(x))
        d = F.relu(self.dec(torch.cat([self.up(F.relu(self.mid(F.max_pool2d(e, 2)))), e], 1)))
        coarse = F.interpolate(F.avg_pool2d(d, 2), scale_factor=2, mode="bilinear")
        return self.out(torch.cat([d, coarse], 1))


class ViT(nn.Module):
    """Patch embedding, a class token, positions, nn.TransformerEncoder (pre-norm)."""

    def __init__(self, d: int = 8) -> None:
        super().__init__()
        self.patch = nn.Conv2d(3, d, 4, 4)
        self.cls = nn.Parameter(torch.randn(1, 1, d))
        self.pos = nn.Parameter(torch.randn(1, 5, d) * 0.1)
        layer = nn.TransformerEncoderLayer(d, 2, 16, dropout=0.0, activation="gelu",
                                           batch_first=True, norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, 1, enable_nested_tensor=False)
        self.head = nn.Linear(d, 3)

    def forward(self, x):
        x = self.patch(x).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], 1) + self.pos
        return self.head(self.encoder(x)[:, 0])


class GPT(nn.Module):
    """Token and position embeddings, a block of causal scaled_dot_product_attention and a
    tanh-GELU MLP, LayerNorms, the head tied to the token embedding."""

    def __init__(self, vocab: int = 16, d: int = 8, heads: int = 2) -> None:
        super().__init__()
        self.heads = heads
        self.wte, self.wpe = nn.Embedding(vocab, d), nn.Embedding(8, d)
        self.ln1, self.ln2, self.ln = nn.LayerNorm(d), nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc1, self.fc2 = nn.Linear(d, 2 * d), nn.Linear(2 * d, d)
        self.lm_head = nn.Linear(d, vocab, bias=False)
        self.lm_head.weight = self.wte.weight

    def forward(self, ids):
        b, t = ids.shape
        x = self.wte(ids) + self.wpe(torch.arange(t))
        q, k, v = (z.view(b, t, self.heads, -1).transpose(1, 2)
                   for z in self.qkv(self.ln1(x)).split(x.shape[-1], dim=2))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, -1))
        x = x + self.fc2(F.gelu(self.fc1(self.ln2(x)), approximate="tanh"))
        return self.lm_head(self.ln(x))


class BERT(nn.Module):
    """Embeddings (token, position, segment), an attention mask input made additive, a
    post-norm layer; the sequence and the tanh-pooled first token as two outputs."""

    def __init__(self, vocab: int = 16, d: int = 8, heads: int = 2) -> None:
        super().__init__()
        self.heads = heads
        self.tok, self.pos, self.seg = nn.Embedding(vocab, d), nn.Embedding(8, d), nn.Embedding(2, d)
        self.ln0, self.ln1, self.ln2 = (nn.LayerNorm(d, eps=1e-12) for _ in range(3))
        self.qkv, self.o = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc1, self.fc2, self.pool = nn.Linear(d, 2 * d), nn.Linear(2 * d, d), nn.Linear(d, d)

    def forward(self, ids, mask):
        b, t = ids.shape
        x = self.ln0(self.tok(ids) + self.pos(torch.arange(t)) + self.seg(torch.zeros_like(ids)))
        additive = (1.0 - mask[:, None, None, :].to(x.dtype)) * torch.finfo(x.dtype).min
        q, k, v = (z.view(b, t, self.heads, -1).permute(0, 2, 1, 3)
                   for z in self.qkv(x).chunk(3, -1))
        scores = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1]) + additive
        attended = (scores.softmax(-1) @ v).permute(0, 2, 1, 3).reshape(b, t, -1)
        x = self.ln1(x + self.o(attended))
        x = self.ln2(x + self.fc2(F.gelu(self.fc1(x))))
        return x, torch.tanh(self.pool(x[:, 0]))


class TextRNN(nn.Module):
    """Token ids through an embedding and an LSTM; the mean of its outputs classified."""

    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(12, 4)
        self.lstm = nn.LSTM(4, 3, batch_first=True)
        self.fc = nn.Linear(3, 2)

    def forward(self, ids):
        return self.fc(self.lstm(self.emb(ids))[0].mean(1))


class AudioNet(nn.Module):
    """1-d convolutions (strided, dilated), BatchNorm1d, GroupNorm, max and adaptive pooling."""

    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.Conv1d(1, 4, 9, stride=2, padding=4), nn.BatchNorm1d(4), nn.LeakyReLU(0.1),
            nn.MaxPool1d(2), nn.Conv1d(4, 4, 5, padding=4, dilation=2), nn.GroupNorm(2, 4),
            nn.ELU(), nn.AdaptiveAvgPool1d(1))
        self.fc = nn.Linear(4, 3)

    def forward(self, wav):
        return self.fc(self.net(wav).squeeze(-1)).log_softmax(-1)


class Mixer(nn.Module):
    """MLP-Mixer: patches, token mixing across the transposed patches, channel mixing."""

    def __init__(self, d: int = 6, tokens: int = 4) -> None:
        super().__init__()
        self.patch = nn.Conv2d(3, d, 4, 4)
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.tokens = nn.Sequential(nn.Linear(tokens, 8), nn.GELU(), nn.Linear(8, tokens))
        self.channels = nn.Sequential(nn.Linear(d, 8), nn.GELU(), nn.Linear(8, d))
        self.head = nn.Linear(d, 2)

    def forward(self, x):
        x = self.patch(x).flatten(2).transpose(1, 2)
        x = x + self.tokens(self.ln1(x).transpose(1, 2)).transpose(1, 2)
        return self.head((x + self.channels(self.ln2(x))).mean(1))


class IndexOps(nn.Module):
    """where, masked_fill (from integer ids), cumsum, topk, gather, argmax: four outputs,
    two of them int64."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(6, 6)

    def forward(self, x, ids):
        h = self.fc(x)
        h = torch.where(h > 0, h, 0.1 * h).masked_fill(ids == 0, -1.0)
        values, order = torch.topk(torch.cumsum(h, dim=1), 3, dim=1)
        return values + torch.gather(h, 1, order), order, h.argmax(1), h.amax(1)


class Llama(nn.Module):
    """RMSNorm, rotary position embeddings, grouped-query causal attention, a SwiGLU MLP."""

    def __init__(self, vocab: int = 16, d: int = 8, heads: int = 2, kv_heads: int = 1) -> None:
        super().__init__()
        self.heads, self.kv_heads, self.hd = heads, kv_heads, d // heads
        self.emb = nn.Embedding(vocab, d)
        self.norm1, self.norm2 = nn.RMSNorm(d, eps=1e-6), nn.RMSNorm(d, eps=1e-6)
        self.q, self.o = nn.Linear(d, d, bias=False), nn.Linear(d, d, bias=False)
        self.kv = nn.Linear(d, 2 * kv_heads * self.hd, bias=False)
        self.gate, self.up = nn.Linear(d, 2 * d, bias=False), nn.Linear(d, 2 * d, bias=False)
        self.down, self.head = nn.Linear(2 * d, d, bias=False), nn.Linear(d, vocab, bias=False)
        inverse = 1.0 / 10000 ** (torch.arange(0, self.hd, 2).float() / self.hd)
        self.register_buffer("inverse_frequency", inverse, persistent=False)

    @staticmethod
    def _rotated(x, cos, sin):
        first, second = x.chunk(2, dim=-1)
        return x * cos + torch.cat([-second, first], -1) * sin

    def forward(self, ids):
        b, t = ids.shape
        x = self.emb(ids)
        angles = torch.outer(torch.arange(t, dtype=torch.float32), self.inverse_frequency)
        angles = torch.cat([angles, angles], -1)
        cos, sin = angles.cos(), angles.sin()
        h = self.norm1(x)
        q = self.q(h).view(b, t, self.heads, self.hd).transpose(1, 2)
        k, v = (z.view(b, t, self.kv_heads, self.hd).transpose(1, 2)
                for z in self.kv(h).chunk(2, -1))
        q, k = self._rotated(q, cos, sin), self._rotated(k, cos, sin)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        x = x + self.o(y.transpose(1, 2).reshape(b, t, -1))
        h = self.norm2(x)
        return self.head(x + self.down(F.silu(self.gate(h)) * self.up(h)))


class KVCache(nn.Module):
    """A decoding step: the new key and value written into caches at a position input
    (index_copy: ScatterND, or ScatterElements on the shapes), attention under a mask of the
    positions written so far; the updated caches as outputs."""

    def __init__(self, d: int = 4) -> None:
        super().__init__()
        self.qkv = nn.Linear(d, 3 * d)

    def forward(self, x, keys, values, position):
        q, k, v = (z.unsqueeze(1) for z in self.qkv(x).chunk(3, -1))
        keys, values = keys.index_copy(2, position, k), values.index_copy(2, position, v)
        mask = (torch.arange(keys.shape[2]) <= position)[None]
        return F.scaled_dot_product_attention(q, keys, values, attn_mask=mask), keys, values


class Cond(nn.Module):
    """torch.cond on a value of the data: an If whose condition is computed on the device."""

    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = nn.Linear(4, 4), nn.Linear(4, 4)

    def forward(self, x):
        return torch.cond(x.sum() > 0, lambda x: self.a(x).relu(), lambda x: self.b(x).tanh(),
                          (x,))


class Residual(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(4, 4)

    def forward(self, x):
        return F.relu(self.linear(x)) + x


class Functions(nn.Module):
    """Exported with ``export_modules_as_functions``: calls of a model-local function."""

    def __init__(self) -> None:
        super().__init__()
        self.first, self.second = Residual(), Residual()

    def forward(self, x):
        return self.second(self.first(x)).softmax(-1)


class PaddedAttention(nn.Module):
    """nn.MultiheadAttention under a causal mask (triu of a constant) and a key padding mask
    made additive from a boolean input; the averaged weights as a second output."""

    def __init__(self, d: int = 8) -> None:
        super().__init__()
        self.attention = nn.MultiheadAttention(d, 2, batch_first=True)

    def forward(self, x, padding):
        causal = nn.Transformer.generate_square_subsequent_mask(x.shape[1])
        additive = torch.zeros(padding.shape).masked_fill(padding, float("-inf"))
        return self.attention(x, x, x, key_padding_mask=additive, attn_mask=causal)


def _ids(shape, vocab: int, seed: int = 0) -> torch.Tensor:
    return torch.randint(0, vocab, shape, generator=torch.Generator().manual_seed(seed))


def _padding(lengths, size: int) -> torch.Tensor:
    return torch.arange(size)[None, :] >= torch.tensor(lengths)[:, None]


# name: (module class, each call's inputs (the first is the export's example), exporters,
# whether the batch axis is dynamic). "dynamo" is torch.onnx.export's default exporter. The
# transformers share a batch of 2, 5 positions and a width of 8, so that kernels of the same
# shapes compile once per run.
MODELS = {
    "resnet": (ResNet, [(torch.randn(2, 3, 12, 12),)], ["dynamo"], False),
    "mobilenet_v2_mbconv": (MobileBlocks, [(torch.randn(2, 4, 6, 6),)], ["dynamo"], False),
    "unet": (UNet, [(torch.randn(1, 1, 8, 8),)], ["dynamo"], False),
    "vit": (ViT, [(torch.randn(2, 3, 8, 8),)], ["dynamo"], False),
    "gpt": (GPT, [(_ids((2, 5), 16),)], ["dynamo"], False),
    "bert": (BERT, [(_ids((2, 5), 16), torch.tensor([[1] * 5, [1] * 3 + [0] * 2]))],
             ["dynamo"], False),
    "text_rnn": (TextRNN, [(_ids((2, 3), 12),)], ["dynamo"], False),
    "audio_conv1d": (AudioNet, [(torch.randn(2, 1, 32),)], ["dynamo"], False),
    "mlp_mixer": (Mixer, [(torch.randn(2, 3, 8, 8),)], ["dynamo"], False),
    "index_ops": (IndexOps, [(torch.randn(2, 6), _ids((2, 6), 3, 1))], ["dynamo"], True),
    "llama": (Llama, [(_ids((2, 5), 16),)], ["dynamo"], False),
    "kv_cache": (KVCache, [(torch.randn(2, 1, 4), torch.randn(2, 1, 5, 4),
                            torch.randn(2, 1, 5, 4), torch.tensor([2]))],
                 ["dynamo", "torchscript"], False),
    "cond": (Cond, [(torch.randn(3, 4).abs(),), (-torch.randn(3, 4).abs(),)], ["dynamo"],
             False),
    "functions": (Functions, [(torch.randn(2, 4),)], ["torchscript"], False),
    "padded_attention": (PaddedAttention, [(torch.randn(2, 5, 8), _padding([5, 3], 5))],
                         ["torchscript"], False),
}

CASES = [(name, exporter) for name, (_, _, exporters, _) in MODELS.items()
         for exporter in exporters]


def _randomise_statistics(module: nn.Module) -> None:
    """Running statistics other than 0 and 1, so inference-mode BatchNormalization (or the
    convolution it is folded into) is tested."""
    for layer in module.modules():
        if isinstance(layer, nn.modules.batchnorm._BatchNorm):
            layer.running_mean.uniform_(-0.5, 0.5)
            layer.running_var.uniform_(0.5, 2.0)


@functools.cache
def _exported(name: str, exporter: str) -> tuple[nn.Module, onnx.ModelProto]:
    """The module (random weights, eval mode) and its export, made once per run."""
    build, calls, _, dynamic = MODELS[name]
    torch.manual_seed(0)
    module = build().eval()
    _randomise_statistics(module)
    example = calls[0]
    names = [f"input{i}" for i in range(len(example))]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if exporter == "dynamo":
            batch = torch.export.Dim("batch")
            shapes = tuple({0: batch} for _ in example) if dynamic else None
            program = torch.onnx.export(module, example, input_names=names, verbose=False,
                                        dynamic_shapes=shapes)
            return module, program.model_proto
        buffer = io.BytesIO()
        axes = {n: {0: "batch"} for n in names} if dynamic else None
        functions = {Residual} if name == "functions" else False
        torch.onnx.export(module, example, buffer, dynamo=False, input_names=names,
                          opset_version=17, dynamic_axes=axes,
                          export_modules_as_functions=functions)
        return module, onnx.load_from_string(buffer.getvalue())


def _other_batch(inputs: tuple) -> tuple:
    """The inputs at batch size 3: floats drawn again, integers repeated."""
    return tuple(torch.randn((3,) + x.shape[1:]) if x.is_floating_point()
                 else torch.cat([x, x[:1]]) for x in inputs)


@pytest.mark.parametrize("name, exporter", CASES, ids=[f"{n}-{e}" for n, e in CASES])
def test_exported_model_matches_pytorch_and_onnxruntime(name, exporter, device):
    module, proto = _exported(name, exporter)
    _, calls, _, dynamic = MODELS[name]
    calls = calls + [_other_batch(calls[0])] if dynamic else calls
    model = gingham.onnx.load(proto, device=device)
    for inputs in calls:
        feed = {n: x.numpy() for n, x in zip(model.input_names, inputs)}
        with torch.no_grad():
            expected = module(*inputs)
        expected = [t.numpy() for t in (expected if isinstance(expected, tuple) else (expected,))]
        want = ort_oracle.run_onnxruntime(proto, feed)
        got = model.run(None, feed)
        ort_oracle.assert_close(got, want, model.output_names, rtol=1e-4, atol=1e-5)
        ort_oracle.assert_close(got, expected, model.output_names, rtol=1e-4, atol=1e-5)
    # one trace per input signature: Cond's two calls share one (its If selects on the device)
    assert model.traces == (2 if dynamic else 1)

