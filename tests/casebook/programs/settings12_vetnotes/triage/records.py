"""Synthetic visit records shaped like the practice-management system's export (one dict per visit).

The urgency label (0 routine .. 3 critical) follows the triage nurses' rubric loosely: visit kind, vitals out of
range, finding severity, toxin exposure.
"""
import random

KINDS = ("wellness", "emergency", "dental", "followup", "surgery")
KIND_WEIGHTS = (0.34, 0.18, 0.14, 0.22, 0.12)

SPECIES = {
    "dog": ("labrador", "border collie", "dachshund", "greyhound", "french bulldog", "mixed breed", "beagle"),
    "cat": ("domestic shorthair", "maine coon", "siamese", "ragdoll", "bengal"),
    "rabbit": ("lop", "netherland dwarf", "rex"),
    "ferret": ("standard", "albino"),
}
NAMES = ("bella", "max", "luna", "charlie", "milo", "daisy", "rocky", "coco", "biscuit", "pepper", "olive", "ziggy",
         "nala", "finn", "mochi", "tofu", "bruno", "hazel", "otis", "willow", "juniper", "pickles", "ruby", "scout")
SYSTEMS = ("skin", "ears", "eyes", "oral cavity", "heart", "lungs", "abdomen", "musculoskeletal", "neuro",
           "lymph nodes", "urogenital")
FINDING_TEXT = {
    1: ("unremarkable", "mild tartar", "small sebaceous cyst", "slight waxy discharge", "nuclear sclerosis"),
    2: ("grade II/VI systolic murmur", "moderate otitis externa", "painful on palpation", "lameness 2/5 left fore",
        "enlarged submandibular nodes", "hot spot over rump"),
    3: ("pale mucous membranes", "distended, tympanic abdomen", "absent lung sounds ventrally", "non-ambulatory",
        "active seizure activity", "severe dehydration, tacky gums"),
}
COMPLAINTS = ("vomiting", "not eating", "hit by car", "collapse", "breathing difficulty", "bloody diarrhoea",
              "swollen face", "straining to urinate", "limping", "seizure", "ate chocolate", "cut paw pad")
DRUGS = (("meloxicam", 1.5, "SID"), ("amoxicillin-clavulanate", 250, "BID"), ("maropitant", 16, "SID"),
         ("gabapentin", 100, "TID"), ("buprenorphine", 0.3, "q8h"), ("prednisolone", 5, "SID"),
         ("furosemide", 20, "BID"), ("methadone", 2, "q4h"), ("omeprazole", 10, "SID"))
VACCINES = ("DHPP", "rabies", "leptospirosis", "bordetella", "FVRCP", "FeLV", "RHDV2", "myxomatosis")
CONCERNS = ("drinking more than usual", "Scratching at night", "Bad breath", "less playful", "Lump on flank",
            "Coughing after walks", "hiding under the bed", "weight gain", "Sneezing", "limping after rest")
TOXINS = (("chocolate", "half a bar"), ("xylitol gum", "2 pieces"), ("rat bait", "unknown"), ("lilies", "pollen"),
          ("grapes", "a handful"), ("ibuprofen", "1 tablet"))
PLANS = (None, None, "recheck in 2 weeks", "bloods and urinalysis", "weight management diet", "refer to specialist",
         "radiographs today", "start analgesia, recheck 48 h", "hospitalise overnight")


def _vitals(rng, species, sick):
    base_hr = {"dog": 100, "cat": 180, "rabbit": 220, "ferret": 230}[species]
    return {
        "weight_kg": rng.uniform(0.8, 45.0) if species == "dog" else rng.uniform(0.6, 7.5),
        "weight_delta_kg": None if rng.random() < 0.3 else rng.gauss(0.0, 0.6),
        "temp_c": rng.gauss(38.6 if not sick else 39.4, 0.4 if not sick else 1.1),
        "hr": int(rng.gauss(base_hr * (1.25 if sick else 1.0), 15)),
        "rr": int(rng.gauss(28 if sick else 22, 6)),
        "bcs": rng.randint(3, 8),
        "crt_s": round(rng.choice((1, 1, 1.5, 2, 2.5, 3)) if sick else rng.choice((1, 1.5)), 1),
        "mm": rng.choice(("pink", "pink", "pale", "injected", "tacky")) if sick else "pink",
    }


def _findings(rng, k, max_sev):
    out = []
    for _ in range(k):
        sev = rng.randint(1, max_sev)
        out.append({"system": rng.choice(SYSTEMS), "text": rng.choice(FINDING_TEXT[sev]), "severity": sev,
                    "new": rng.random() < 0.3})
    return out


def _meds(rng, k):
    return [{"drug": d, "dose_mg": round(mg * rng.choice((0.5, 1, 1, 2)), 2), "freq": f,
             "route": rng.choice(("IV", "SC", "PO", "IM"))} for d, mg, f in rng.sample(DRUGS, k)]


def visit(rng: random.Random):
    kind = rng.choices(KINDS, KIND_WEIGHTS)[0]
    species = rng.choice(tuple(SPECIES))
    sick = kind in ("emergency", "surgery") or rng.random() < 0.15
    patient = {"name": rng.choice(NAMES), "species": species, "breed": rng.choice(SPECIES[species]),
               "age_years": rng.randint(0, 17), "sex": rng.choice(("M", "F")), "neutered": rng.random() < 0.7}
    vitals = _vitals(rng, species, sick)
    findings = _findings(rng, rng.randint(1, 5), 3 if sick else 2)
    rec = {
        "kind": kind, "patient": patient, "vitals": vitals, "findings": findings,
        "meds": _meds(rng, rng.randint(0, 3)),
        "owner_concerns": rng.sample(CONCERNS, rng.randint(0, 3)),
        "plan": rng.choice(PLANS),
        "complaint": rng.choice(COMPLAINTS), "duration_h": rng.choice((None, 2, 6, 12, 24, 48)),
        "arrival": {"mode": rng.choice(("by car", "carried in", "by ambulance")), "hour": rng.randint(0, 23),
                    "minute": rng.randint(0, 59)},
        "toxin": (dict(zip(("agent", "amount"), rng.choice(TOXINS)), hours_ago=rng.randint(1, 8))
                  if kind == "emergency" and rng.random() < 0.3 else None),
        "vaccines": [{"name": v, "booster": rng.random() < 0.4} for v in rng.sample(VACCINES, rng.randint(0, 3))],
        "dental": {"grade": rng.randint(1, 4), "calculus": rng.randint(0, 3), "gingivitis": rng.randint(0, 3),
                   "teeth": [{"id": rng.randint(101, 411), "issue": rng.choice(("fracture", "resorption",
                                                                                 "mobility", "abscess"))}
                             for _ in range(rng.randint(0, 3))]},
        "days_since": rng.randint(2, 30),
        "previous": {"reason": rng.choice(COMPLAINTS), "meds": _meds(rng, rng.randint(0, 2))},
        "compliance": rng.choice(("good", "partial", "poor")),
        "progress": rng.choice(("improving", "static", "worse", "resolved")),
        "labs": ({k: round(rng.uniform(lo, hi), 1) for k, lo, hi in (("pcv", 15, 55), ("tp", 45, 85),
                                                                     ("bun", 3, 40), ("glu", 3, 20))}
                 if rng.random() < 0.5 else {}),
        "asa": rng.randint(1, 5),
        "imaging": [{"modality": rng.choice(("radiographs", "ultrasound", "CT")),
                     "result": rng.choice(("no abnormality", "foreign body", "mass effect", "free fluid"))}
                    for _ in range(rng.randint(0, 2))],
    }
    rec["label"] = urgency(rec)
    return rec


def urgency(rec):
    score = {"wellness": 0, "dental": 0.5, "followup": 0.7, "surgery": 1.5, "emergency": 2.0}[rec["kind"]]
    v = rec["vitals"]
    score += 0.8 * (v["temp_c"] > 39.7 or v["temp_c"] < 37.2) + 0.6 * (v["crt_s"] > 2) + 0.5 * (v["mm"] != "pink")
    score += 0.7 * max(f["severity"] for f in rec["findings"]) - 0.7
    score += 1.0 * (rec["toxin"] is not None) + 0.3 * (rec["progress"] == "worse" and rec["kind"] == "followup")
    return min(3, int(score))
