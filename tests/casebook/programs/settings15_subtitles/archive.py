"""A synthetic subtitle archive: SRT files of Russian-dubbed episodes as old fansub releases shipped them
(Windows-1251, CRLF line ends), written at start-up into the run's scratch directory, with a releases index."""
import os
import random

WORDS = ("я ты он она мы вы они это что как где когда почему кто здесь там сейчас потом уже ещё "
         "надо можно нельзя хорошо плохо знаю думаю вижу хочу иду пойдём давай стой смотри слушай "
         "капитан доктор мама папа брат сестра друг дом корабль город дорога ночь утро время деньги "
         "правда ложь война мир помощь вопрос ответ письмо телефон машина поезд окно дверь").split()
ENDINGS = (".", "?", "!")


def _cue_text(rng):
    words = [rng.choice(WORDS) for _ in range(rng.randint(3, 11))]
    end = rng.choices(ENDINGS, weights=(6, 3, 1))[0]
    if end == "?" and rng.random() < 0.7:
        words.insert(0, rng.choice(("что", "как", "где", "когда", "почему", "кто")))
    line = " ".join(words).capitalize() + end
    if rng.random() < 0.25:                       # two speakers in one cue
        line = "- " + line + "\r\n- " + " ".join(rng.choice(WORDS) for _ in range(4)).capitalize() + "."
    return line


def _stamp(ms):
    h, ms = divmod(ms, 3_600_000)
    m, ms = divmod(ms, 60_000)
    s, ms = divmod(ms, 1000)
    return f"{h:02d}:{m:02d}:{s:02d},{ms:03d}"


def write_archive(root, episodes, cues, seed=0):
    rng = random.Random(seed)
    paths = []
    for e in range(episodes):
        t = rng.randint(2000, 60000)
        parts = []
        for c in range(cues):
            dur = rng.randint(900, 4200)
            parts.append(f"{c + 1}\r\n{_stamp(t)} --> {_stamp(t + dur)}\r\n{_cue_text(rng)}\r\n")
            t += dur + rng.randint(100, 3000)
        path = os.path.join(root, f"s{e // 24 + 1:02d}e{e % 24 + 1:02d}.srt")
        with open(path, "wb") as fh:
            fh.write("\r\n".join(parts).encode("cp1251"))
        paths.append(path)
    index = os.path.join(root, "releases.txt")
    with open(index, "wb") as fh:
        fh.write("\r\n".join(f"{os.path.basename(p)}\tрелиз {i + 1}\tперевод студии «Кураж»"
                             for i, p in enumerate(paths)).encode("cp1251"))
    return paths, index
