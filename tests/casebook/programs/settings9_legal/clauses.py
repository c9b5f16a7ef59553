"""Synthetic contract clauses and the clause featurizer.

Clauses are drawn from per-category templates with parties, amounts, dates and
cross-references filled in; the featurizer tokenizes them with Unicode-aware,
case-insensitive patterns and extracts rule hits (money, dates, section
references, defined terms, key phrases).
"""
import random
import zlib

import regex

CATEGORIES = ["indemnity", "termination", "confidentiality", "governing_law", "liability", "payment",
              "assignment", "warranty"]
PARTIES = ["Müller Straße Logistik GmbH", "Société Générale d'Équipement SA", "Łukasz Wójcik sp. z o.o.",
           "Acme Widgets Inc.", "Nørre Fjord ApS", "Ibérica Señales SL", "Hoffmann & Söhne KG", "Contoso Ltd",
           "Çelik Yapı A.Ş.", "Björk Analytics AB"]
MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
          "November", "December"]
FILLER = ("subject to the terms and conditions set forth herein and without prejudice to any other right or "
          "remedy available under applicable law the parties acknowledge and agree that notwithstanding anything "
          "to the contrary contained in this agreement or any schedule exhibit or statement of work").split()
TEMPLATES = {
    "indemnity": "{A} shall indemnify, defend and hold harmless {B} and its affiliates from and against any and all "
                 "losses, damages, liabilities and reasonable attorneys' fees arising out of {ref}",
    "termination": "Either party may terminate this Agreement upon {n} days' prior written notice to {B}, and {A} "
                   "may terminate immediately if {B} breaches {ref} and fails to cure such breach",
    "confidentiality": "{A} shall keep all Confidential Information of {B} strictly confidential and shall not "
                       "disclose it to any third party except as required by law or under {ref}",
    "governing_law": "This Agreement and any dispute arising out of it shall be governed by the laws of {law}, and "
                     "the courts of {law} shall have exclusive jurisdiction, save as provided in {ref}",
    "liability": "In no event shall {A} be liable to {B} for indirect or consequential damages, and its aggregate "
                 "liability under {ref} shall not exceed {money}",
    "payment": "{B} shall pay {A} the fees of {money} within {n} days of the invoice date, and late payments shall "
               "bear interest at {pct} per annum as set out in {ref}",
    "assignment": "Neither party may assign or transfer this Agreement without the prior written consent of the "
                  "other party, except that {A} may assign it to an affiliate under {ref}",
    "warranty": "{A} warrants that the services will be performed in a professional and workmanlike manner and "
                "that the deliverables will conform to {ref} for {n} days after acceptance by {B}",
}
LAWS = ["England and Wales", "the State of Delaware", "Bayern, Deutschland", "la République française",
        "the Kingdom of Sweden", "Ontario"]


class ClauseSource:
    def __init__(self, seed):
        self.rng = random.Random(seed)

    def _ref(self):
        r = self.rng
        kind = r.choice(["Section", "Clause", "Article", "Schedule", "§"])
        return f"{kind} {r.randint(1, 24)}.{r.randint(1, 9)}({r.choice('abcdef')})"

    def _money(self):
        r = self.rng
        cur = r.choice(["$", "€", "£", "USD ", "EUR ", "CHF "])
        return f"{cur}{r.randint(1, 999):,}{r.choice([',000', ',500', ',250,000', ''])}.{r.randint(0, 99):02d}"

    def clause(self):
        r = self.rng
        cat = r.randrange(len(CATEGORIES))
        a, b = r.sample(PARTIES, 2)
        body = TEMPLATES[CATEGORIES[cat]].format(A=a, B=b, ref=self._ref(), n=r.choice([10, 14, 30, 45, 60, 90]),
                                                 law=r.choice(LAWS), money=self._money(),
                                                 pct=f"{r.randint(1, 12)}.{r.randint(0, 9)}%")
        pre = " ".join(r.choice(FILLER) for _ in range(r.randint(20, 70)))
        post = " ".join(r.choice(FILLER) for _ in range(r.randint(10, 50)))
        date = f"{r.randint(1, 28)} {r.choice(MONTHS)} {r.randint(2015, 2026)}"
        defined = f'"{r.choice(["Effective Date", "Services", "Deliverables", "Territory", "Fees"])}" means'
        text = f"{pre.capitalize()}, {body} with effect from {date}. {defined} the {post}; see {self._ref()}."
        return text, cat


class ClauseFeaturizer:
    """Compiles the rule patterns (in the regex dialect in force) and featurizes clauses."""

    def __init__(self, buckets):
        self.buckets = buckets
        letters = r"a-z\u00c0-\u024f"
        self.token = regex.compile(rf"(?i)[{letters}]+(?:['\-][{letters}]+)*|\d+(?:[.,]\d+)*|[§$€£%]")
        self.money = regex.compile(r"(?i)(?:usd|eur|gbp|chf|[$€£])\s?\d{1,3}(?:,\d{3})*(?:\.\d{2})?")
        self.xref = regex.compile(r"(?i)(?:\b(?:section|clause|article|schedule)|§)\s*\d+(?:\.\d+)*(?:\([a-z]\))?")
        self.date = regex.compile(r"(?i)\b\d{1,2}\s+(?:" + "|".join(MONTHS) + r")\s+\d{4}\b")
        self.defined = regex.compile(r'(?i)"([a-z][a-z\s\-]{2,40})"\s+(?:means|shall\s+mean)')
        self.party = regex.compile(rf"(?i)\b[{letters}][{letters}'&\-]*(?:\s+[{letters}][{letters}'&\-]*){{0,4}}\s+"
                                   r"(?:gmbh|sa|sl|ab|aps|kg|inc|ltd|a\.ş|sp\. z o\.o)\b\.?")
        self.phrases = [regex.compile(p) for p in (
            r"(?i)\bindemnif\w*|\bhold\s+harmless", r"(?i)\bterminat\w*", r"(?i)\bconfidential\w*",
            r"(?i)\bgoverned\s+by|\bjurisdiction", r"(?i)\bliab\w*|\bconsequential", r"(?i)\bpa(?:y|id)\w*|\binvoice",
            r"(?i)\bassign\w*|\btransfer\w*", r"(?i)\bwarrant\w*|\bworkmanlike")]

    def __call__(self, text, max_len):
        toks = self.token.findall(text)
        toks = toks[:max_len - 4] + ["party:" + p.lower() for p in self.party.findall(text)][:4]
        ids = [1 + (zlib.crc32(t.lower().encode()) % (self.buckets - 1)) for t in toks]
        rules = [len(self.money.findall(text)), len(self.xref.findall(text)), len(self.date.findall(text)),
                 len(self.defined.findall(text)), sum(t.startswith("party:") for t in toks)]
        rules += [len(p.findall(text)) for p in self.phrases]
        return ids, rules
