"""Raw reports of the corrie weather-station network, in the stations' METAR-like text format, and the
parser the pool workers run on each one."""
import math
import random

REGIME_NAMES = ("CLR", "VCLD", "FOHN", "FRRA", "SHSN")


def build_archive(cfg):
    n = cfg.network
    rnd = random.Random(n.seed)
    out = []
    for i in range(n.archive_reports):
        regime = rnd.randrange(n.regimes)
        temp = rnd.gauss([6, 2, 12, 5, -2][regime % 5], 3.0)
        dew = temp - abs(rnd.gauss([8, 1, 14, 1, 2][regime % 5], 2.0))
        wdir = int(rnd.gauss([270, 200, 160, 230, 320][regime % 5], 40)) % 360
        wspd = abs(rnd.gauss([8, 4, 30, 18, 22][regime % 5], 6))
        gust = wspd + abs(rnd.gauss(6, 4))
        qnh = rnd.gauss([1024, 1016, 1004, 996, 1000][regime % 5], 5)
        vis = max(100, int(rnd.gauss([9999, 3000, 9999, 4000, 1500][regime % 5], 1500)))
        cloud = " ".join(f"{rnd.choice(['FEW', 'SCT', 'BKN', 'OVC'])}{rnd.randint(3, 80):03d}"
                         for _ in range(rnd.randint(0, 3)))
        rain = rnd.expovariate(1.0) * [0.1, 0.5, 0.1, 4.0, 1.5][regime % 5]
        line = (f"C{rnd.randrange(n.stations):03d} {1_700_000_000 + 600 * i} {wdir:03d}{wspd:04.1f}G{gust:04.1f}KT "
                f"{vis:04d} {cloud or 'NSC'} {temp:+05.1f}/{dew:+05.1f} Q{qnh:06.1f} RR{rain:05.2f} "
                f"HUM{100 * math.exp(0.06 * (dew - temp)):05.1f} RMK {REGIME_NAMES[regime % 5]}")
        out.append(line)
    return out


COVER = {"FEW": 0.2, "SCT": 0.4, "BKN": 0.7, "OVC": 1.0}


def parse_report(line):
    """One raw report -> (24 features, regime index)."""
    parts = line.split()
    wind = parts[2]
    wdir = int(wind[:3])
    wspd, gust = wind[3:-2].split("G")
    wspd, gust = float(wspd), float(gust)
    vis = float(parts[3])
    k = 4
    cover = [0.0, 0.0, 0.0]
    base = [0.0, 0.0, 0.0]
    j = 0
    while parts[k][:3] in COVER or parts[k] == "NSC":
        if parts[k] != "NSC" and j < 3:
            cover[j] = COVER[parts[k][:3]]
            base[j] = int(parts[k][3:]) / 80.0
            j += 1
        k += 1
    temp, dew = (float(v) for v in parts[k].split("/"))
    qnh = float(parts[k + 1][1:])
    rain = float(parts[k + 2][2:])
    hum = float(parts[k + 3][3:])
    regime = REGIME_NAMES.index(parts[-1])
    rad = math.radians(wdir)
    feats = (math.sin(rad), math.cos(rad), wspd / 30, gust / 40, (gust - wspd) / 10, math.log10(vis) / 4,
             *cover, *base, temp / 10, dew / 10, (temp - dew) / 10, (qnh - 1010) / 10, math.log1p(rain),
             hum / 100, wspd * math.sin(rad) / 30, wspd * math.cos(rad) / 30, float(j), temp * hum / 1000,
             (qnh - 1010) * wspd / 300, math.sqrt(max(temp - dew, 0.0)) / 4)
    return feats, regime


def warm(_):
    return parse_report("C001 1700000000 27008.0G12.0KT 9999 FEW030 +06.0/+01.0 Q1020.0 RR00.10 HUM070.0 RMK CLR")
