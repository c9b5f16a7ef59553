"""Per-trace features: per-channel log spectrogram and STA/LTA of a
3-component waveform window, each channel scaled to unit spread."""
import numpy as np

NFFT, HOP = 64, 32
_WIN = np.hanning(NFFT).astype(np.float32)


def channel_features(x):
    """x: (T,) float32 -> (frames, NFFT//2+2) features of one channel."""
    frames = np.lib.stride_tricks.sliding_window_view(x, NFFT)[::HOP]
    power = np.abs(np.fft.rfft(frames * _WIN, axis=-1)) ** 2
    # dead channels and zeroed telemetry gaps give zero power / zero spread:
    # the -inf / nan they produce are masked by the caller
    logp = np.log10(power)
    logp = (logp - logp.mean()) / logp.std()
    energy = power.sum(-1)
    sta_lta = energy / np.convolve(energy, np.ones(8, np.float32) / 8, mode="same")
    return np.concatenate([logp, sta_lta[:, None]], axis=1)


def station_features(trace):
    out = np.stack([channel_features(c) for c in trace])
    out[~np.isfinite(out)] = 0.0
    return out.astype(np.float32)
