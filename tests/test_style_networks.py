"""AdaIN networks: the published weight layout, the AdaIN statistics, alpha, and bad weight files."""

from __future__ import annotations

import os
import pickle

import numpy as np
import pytest
import torch

from shiftbench.errors import MissingWeightsError, WeightsFormatError
from shiftbench.style.networks import AdaINNetworks, adain, build_decoder, build_encoder, load_state_dict, mean_std

# The published files' layout, written here from the architecture (VGG-19 "E" and its mirror)
# independently of shiftbench.style.networks: key index -> (out, in, k) of each conv.
VGG_CONVS = {0: (3, 3, 1), 2: (64, 3, 3), 5: (64, 64, 3), 9: (128, 64, 3), 12: (128, 128, 3), 16: (256, 128, 3),
             19: (256, 256, 3), 22: (256, 256, 3), 25: (256, 256, 3), 29: (512, 256, 3), 32: (512, 512, 3),
             35: (512, 512, 3), 38: (512, 512, 3), 42: (512, 512, 3), 45: (512, 512, 3), 48: (512, 512, 3),
             51: (512, 512, 3)}
DECODER_CONVS = {1: (256, 512), 5: (256, 256), 8: (256, 256), 11: (256, 256), 14: (128, 256), 18: (128, 128),
                 21: (64, 128), 25: (64, 64), 28: (3, 64)}


def published_state(convs: dict[int, tuple[int, ...]], seed: int, upto: int | None = None) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    out = {}
    for i, spec in convs.items():
        if upto is not None and i >= upto:
            continue
        o, c = spec[0], spec[1]
        k = spec[2] if len(spec) == 3 else 3
        out[f"{i}.weight"] = torch.randn(o, c, k, k, generator=g) * (2.0 / (c * k * k)) ** 0.5
        out[f"{i}.bias"] = torch.randn(o, generator=g) * 0.01
        if o == 3 and c == 64:  # the decoder's last conv: outputs around 0.5, mostly inside [0, 1]
            out[f"{i}.weight"] *= 0.02
            out[f"{i}.bias"] += 0.5
    return out


@pytest.fixture(scope="module")
def weights(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str, dict, dict]:
    d = tmp_path_factory.mktemp("adain")
    vgg, dec = published_state(VGG_CONVS, 1), published_state(DECODER_CONVS, 2)
    torch.save(vgg, d / "vgg_normalised.pth")
    torch.save(dec, d / "decoder.pth")
    return str(d / "vgg_normalised.pth"), str(d / "decoder.pth"), vgg, dec


def test_published_layout_loads_through_the_real_loader(weights, tmp_path) -> None:
    vgg_path, dec_path, vgg, dec = weights
    net = AdaINNetworks.from_files(vgg_path, dec_path)
    enc_state, dec_state = net.encoder.state_dict(), net.decoder.state_dict()
    # AdaIN keeps the encoder up to relu4_1 (module 30): conv keys 0..29, deeper ones ignored
    assert sorted(enc_state) == sorted(k for k in vgg if int(k.split(".")[0]) < 31)
    for k, v in enc_state.items():
        assert torch.equal(v, vgg[k])
    assert sorted(dec_state) == sorted(dec)
    for k, v in dec_state.items():
        assert torch.equal(v, dec[k])
    # a file that stops at relu4_1 loads too
    torch.save(published_state(VGG_CONVS, 1, upto=31), tmp_path / "vgg_short.pth")
    short = AdaINNetworks.from_files(tmp_path / "vgg_short.pth", dec_path)
    assert all(torch.equal(a, b) for a, b in zip(short.encoder.state_dict().values(), enc_state.values()))
    assert set(net.digests) == {"vgg", "decoder"} and all(len(h) == 64 for h in net.digests.values())


def test_encoder_structure_reflection_padding_and_ceil_pooling() -> None:
    enc = build_encoder(31)
    assert len(enc) == 31 and len(build_encoder()) == 53 and len(build_decoder()) == 29
    assert isinstance(enc[0], torch.nn.Conv2d) and enc[0].kernel_size == (1, 1)
    assert all(m.ceil_mode for m in enc if isinstance(m, torch.nn.MaxPool2d))
    assert sum(isinstance(m, torch.nn.ReflectionPad2d) for m in enc) == 9  # 2 + 2 + 4 + 1 3x3 convs up to relu4_1
    assert sum(isinstance(m, torch.nn.Conv2d) for m in build_decoder()) == 9
    assert not isinstance(build_decoder()[-1], torch.nn.ReLU)
    # ceil mode: 36 -> 18 -> 9 -> 5 (floor mode would give 4)
    with torch.no_grad():
        assert tuple(enc(torch.rand(1, 3, 36, 36)).shape) == (1, 512, 5, 5)


def test_adain_output_has_the_style_channel_statistics() -> None:
    g = torch.Generator().manual_seed(0)
    fc = torch.randn(2, 16, 9, 7, generator=g, dtype=torch.float64) * 3 + 1
    fs = torch.randn(2, 16, 5, 6, generator=g, dtype=torch.float64) * torch.rand(2, 16, 1, 1, generator=g, dtype=torch.float64) * 4 - 2
    t = adain(fc, fs)
    # reference statistics with NumPy: unbiased variance (ddof = 1) + 1e-5
    s = fs.numpy().reshape(2, 16, -1)
    t_np = t.numpy().reshape(2, 16, -1)
    np.testing.assert_allclose(t_np.mean(axis=2), s.mean(axis=2), rtol=0, atol=1e-10)
    # the output's std equals the style's sqrt(var + eps) up to the content's eps: |ratio - 1| <= eps / var_c
    want = np.sqrt(s.var(axis=2, ddof=1) + 1e-5)
    got = t_np.std(axis=2, ddof=1)
    np.testing.assert_allclose(got, want, rtol=1e-5 / fc.var().item() + 1e-12)
    m, sd = mean_std(fs)
    np.testing.assert_allclose(sd.numpy().reshape(2, 16), want, rtol=1e-12)
    np.testing.assert_allclose(m.numpy().reshape(2, 16), s.mean(axis=2), rtol=1e-12)


def test_alpha_one_and_zero(weights) -> None:
    net = AdaINNetworks.from_files(*weights[:2])
    g = torch.Generator().manual_seed(3)
    content, style = torch.rand(1, 3, 40, 48, generator=g), torch.rand(1, 3, 32, 32, generator=g)
    with torch.no_grad():
        fc, fs = net.encode(content), net.encode(style)
        full = net.decoder(adain(fc, fs)).clamp(0, 1)
        recon = net.decoder(fc).clamp(0, 1)
        half = net.decoder(0.5 * adain(fc, fs) + 0.5 * fc).clamp(0, 1)
    torch.testing.assert_close(net.stylize(content, style, 1.0), full, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(net.stylize(content, style, 0.5), half, rtol=1e-5, atol=1e-5)
    zero = net.stylize(content, style, 0.0)
    torch.testing.assert_close(zero, recon, rtol=1e-5, atol=1e-5)
    # alpha = 0 is not the clean image: the content still passes the decoder
    assert (zero - content).abs().mean() > 0.01
    # alpha = 0 ignores the style; alpha = 1 does not
    other = torch.rand(1, 3, 32, 32, generator=g)
    torch.testing.assert_close(net.stylize(content, other, 0.0), zero)
    assert not torch.allclose(net.stylize(content, other, 1.0), net.stylize(content, style, 1.0))
    out = net.stylize(content, style, torch.tensor([1.0]))
    assert out.shape == content.shape and float(out.min()) >= 0.0 and float(out.max()) <= 1.0
    with pytest.raises(Exception) as e:
        net.stylize(content, style, 1.5)
    assert getattr(e.value, "argument", None) == "alpha"


def test_missing_weights_name_the_file_and_their_source(weights, tmp_path) -> None:
    with pytest.raises(MissingWeightsError) as e:
        AdaINNetworks.from_files(tmp_path / "nope" / "vgg_normalised.pth", weights[1])
    msg = str(e.value)
    assert e.value.argument == "vgg" and "nope" in msg
    assert "naoto0804/pytorch-AdaIN" in msg and "SHIFTBENCH_ADAIN_VGG" in msg and "magenta-lite" in msg
    with pytest.raises(MissingWeightsError) as e:
        AdaINNetworks.from_files(weights[0], None)
    assert e.value.argument == "decoder"
    assert isinstance(e.value, FileNotFoundError)


def test_weight_file_of_the_wrong_shape(weights, tmp_path) -> None:
    dec = published_state(DECODER_CONVS, 2)
    dec["14.weight"] = torch.zeros(128, 256, 5, 5)
    torch.save(dec, tmp_path / "decoder.pth")
    with pytest.raises(WeightsFormatError) as e:
        AdaINNetworks.from_files(weights[0], tmp_path / "decoder.pth")
    assert e.value.argument == "decoder" and "14.weight" in str(e.value) and "(128, 256, 3, 3)" in str(e.value)
    # the decoder file given as the encoder: keys of the wrong layout
    with pytest.raises(WeightsFormatError) as e:
        AdaINNetworks.from_files(weights[1], weights[1])
    assert e.value.argument == "vgg" and "missing" in str(e.value)
    torch.save([torch.zeros(3)], tmp_path / "list.pth")
    with pytest.raises(WeightsFormatError, match="state_dict"):
        load_state_dict(tmp_path / "list.pth", "decoder", {"a": (3,)})
    (tmp_path / "junk.pth").write_bytes(b"not a checkpoint")
    with pytest.raises(WeightsFormatError) as e:
        load_state_dict(tmp_path / "junk.pth", "vgg", {"a": (3,)})
    assert e.value.argument == "vgg"


class _Payload:
    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):  # type: ignore[no-untyped-def]
        return (os.makedirs, (self.marker,))


def test_pickle_with_code_is_refused_before_it_runs(tmp_path) -> None:
    marker = str(tmp_path / "code-ran")
    state = published_state(DECODER_CONVS, 2)
    state["payload"] = _Payload(marker)  # type: ignore[assignment]
    with open(tmp_path / "decoder.pth", "wb") as fh:
        torch.save(state, fh, pickle_module=pickle)
    with pytest.raises(WeightsFormatError) as e:
        load_state_dict(tmp_path / "decoder.pth", "decoder", {k: tuple(v.shape) for k, v in published_state(DECODER_CONVS, 2).items()})
    assert "weights_only" in str(e.value)
    assert not os.path.exists(marker)
