"""Entity pools and value generators. Each pool has an in-distribution part and a held-out part
that only test groups flagged ``heldout_entities`` draw from (recorded in meta.json)."""

from __future__ import annotations

import datetime as _dt
import random

POOLS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    # name: (in-distribution values, held-out values)
    "names": (
        (
            "Amara", "Ben", "Carla", "Dev", "Elena", "Felix", "Grace", "Hugo", "Ines", "Jonah",
            "Keira", "Liam", "Maya", "Noah", "Olga", "Priya", "Quinn", "Rosa", "Sami", "Tara",
            "Umar", "Vera", "Wes", "Yara", "Zane", "Aiden", "Bella", "Caleb", "Dana", "Eli",
            "Fatima", "Gabe", "Hana", "Ivan", "Jade", "Kofi", "Lena", "Marco", "Nadia", "Omar",
            "Paula", "Rafi", "Sofia", "Theo", "Uma", "Viktor", "Willa", "Yusuf",
        ),
        (
            "Anouk", "Bastian", "Cosima", "Dmitri", "Eshe", "Florin", "Greta", "Hiroshi",
            "Ingrid", "Joaquin", "Kalani", "Ludmila", "Mirela", "Nnamdi", "Oisin", "Perpetua",
        ),
    ),
    "surnames": (
        (
            "Patel", "Nair", "Kim", "Garcia", "Okafor", "Novak", "Schmidt", "Rossi", "Haddad",
            "Ito", "Moreau", "Silva", "Kowalski", "Lindqvist", "O'Brien", "Mensah", "Costa",
            "Yilmaz", "Petrov", "Dubois", "Tanaka", "Jensen", "Alvarez", "Fischer",
        ),
        ("Abernathy", "Bergstrom", "Castellanos", "Drummond", "Eriksen", "Fairweather",
         "Gallagher", "Hollingsworth"),
    ),
    "cities": (
        (
            "Lisbon", "Porto", "Madrid", "Seville", "Lyon", "Nice", "Munich", "Vienna", "Prague",
            "Krakow", "Oslo", "Bergen", "Dublin", "Galway", "Edinburgh", "Bristol", "Rome",
            "Naples", "Athens", "Istanbul", "Marrakesh", "Nairobi", "Cape Town", "Toronto",
            "Montreal", "Chicago", "Denver", "Seattle", "Austin", "Lima", "Santiago",
        ),
        ("Reykjavik", "Tbilisi", "Ljubljana", "Valletta", "Tallinn", "Hobart", "Kyoto", "Cartagena"),
    ),
    "orgs": (
        (
            "Northwind", "Bluepeak", "Harbor Labs", "Greenleaf", "Ironwood", "Brightline",
            "Cedar Analytics", "Riverbend", "Oakridge", "Silverline", "Pinecrest", "Lakeside",
            "Marigold", "Atlas Freight", "Juniper", "Copperfield", "Westgate", "Sunbury",
        ),
        ("Quillfeather", "Zephyr Outfitters", "Kestrel Dynamics", "Obsidian Row", "Tamarind Works"),
    ),
    "products": (
        (
            "espresso machine", "standing desk", "robot vacuum", "noise-cancelling headphones",
            "e-bike", "air fryer", "hiking backpack", "smartwatch", "mechanical keyboard",
            "rowing machine", "camping tent", "blender", "office chair", "electric kettle",
        ),
        ("paddleboard", "telescope", "sourdough starter kit", "kayak"),
    ),
    "meds": (
        ("sertraline", "metformin", "lisinopril", "atorvastatin", "levothyroxine", "omeprazole",
         "amlodipine", "citalopram"),
        ("bupropion", "propranolol", "gabapentin"),
    ),
    "streets": (
        ("Elm Street", "Harbour Road", "Mill Lane", "Station Road", "Park Avenue", "Church Street",
         "Willow Close", "King's Road", "Orchard Way", "Bridge Street", "High Street", "Linden Avenue"),
        ("Foxglove Terrace", "Quarry Hill", "Saffron Walk"),
    ),
    "projects": (
        ("Apollo", "Falcon", "Maple", "Nimbus", "Orion", "Juno", "Tidewater", "Beacon", "Kestrel",
         "Quartz", "Summit", "Lantern"),
        ("Halcyon", "Meridian", "Zenith"),
    ),
}

# Held-out pools as recorded in meta.json: every held-out value, by pool.
HELDOUT_ENTITY_POOLS = {name: list(values[1]) for name, values in POOLS.items()}

MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September",
          "October", "November", "December")
WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday")
FLOORS = ("second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth")
CUISINES = ("Thai food", "sushi", "pizza", "salads", "Lebanese food", "burritos", "ramen",
            "Indian curries", "poke bowls", "dim sum")
INTERVALS = ("6 hours", "12 hours", "24 hours", "2 days", "3 days", "week")
DURATIONS = ("30 minutes", "1 hour", "2 hours", "4 hours", "a full day")
SEATS = ("window", "aisle", "exit-row", "front-row")
COFFEE = ("oat milk", "an extra shot", "no sugar", "two sugars", "almond milk", "cinnamon",
          "skimmed milk", "honey")
ALLERGENS = ("penicillin", "shellfish", "latex", "peanuts", "ibuprofen", "sesame", "cat dander")
HOTELS = ("Grand Palace", "Harbour Inn", "Old Town Suites", "Riverside Lodge", "Hotel Aurora",
          "Garden House", "Blue Door Hotel", "Station Hotel")
DOSES = ("2.5 ml", "5 ml", "7.5 ml", "10 ml")
LANGS = ("Spanish", "Italian", "Japanese", "Portuguese", "German", "Arabic")


class EntitySampler:
    """Draws entity values for one group (in-distribution pools, or held-out pools only)."""

    def __init__(self, rng: random.Random, heldout: bool):
        self.rng = rng
        self.heldout = heldout

    def pool(self, name: str) -> tuple[str, ...]:
        return POOLS[name][1 if self.heldout else 0]

    def pick(self, name: str, exclude: tuple = ()) -> str:
        values = [v for v in self.pool(name) if v not in exclude] or list(self.pool(name))
        return self.rng.choice(values)

    def sample(self, name: str, k: int) -> list[str]:
        return self.rng.sample(self.pool(name), k)


def fmt_date(day: _dt.date) -> str:
    return f"{MONTHS[day.month - 1]} {day.day}"


def value(kind: str, rng: random.Random, ents: EntitySampler) -> str:
    """One value of a value type (used for old/new, owner/other pairs)."""
    if kind == "date":
        return f"{rng.choice(MONTHS)} {rng.randint(1, 28)}"
    if kind == "weekday":
        return rng.choice(WEEKDAYS)
    if kind == "time":
        return f"{rng.randint(7, 10)}:{rng.choice(('00', '15', '30', '45'))}am"
    if kind == "evening_time":
        return f"{rng.randint(7, 9)}:{rng.choice(('00', '15', '30', '45'))}pm"
    if kind == "temp":
        return f"{rng.randint(17, 25)}°C"
    if kind == "amount":
        return f"${rng.randint(2, 60) * 50:,}"
    if kind == "big_amount":
        return f"${rng.randint(10, 90) * 500:,}"
    if kind == "code":
        return f"{rng.randint(1000, 9999)}"
    if kind == "long_code":
        return f"{rng.randint(10, 99)}-{rng.randint(100000, 999999)}"
    if kind == "phone":
        return f"0{rng.randint(7100, 7999)} {rng.randint(100, 999)} {rng.randint(100, 999)}"
    if kind == "floor":
        return rng.choice(FLOORS)
    if kind == "cuisine":
        return rng.choice(CUISINES)
    if kind == "interval":
        return rng.choice(INTERVALS)
    if kind == "duration":
        return rng.choice(DURATIONS)
    if kind == "seat":
        return rng.choice(SEATS)
    if kind == "coffee":
        return rng.choice(COFFEE)
    if kind == "coffee_order":
        return f"a {rng.choice(('flat white', 'latte', 'cappuccino', 'cortado'))} with {rng.choice(COFFEE)}"
    if kind == "allergen":
        return rng.choice(ALLERGENS)
    if kind == "hotel":
        return rng.choice(HOTELS)
    if kind == "dose":
        return rng.choice(DOSES)
    if kind == "room":
        return f"{rng.randint(1, 6)}{rng.choice('ABCD')}"
    if kind == "lang":
        return rng.choice(LANGS)
    if kind == "dr":
        return "Dr. " + ents.pick("surnames")
    if kind == "street_address":
        return f"{rng.randint(2, 98)} {ents.pick('streets')}"
    if kind == "person":
        return ents.pick("names")
    if kind == "surname":
        return ents.pick("surnames")
    if kind == "project":
        return ents.pick("projects")
    if kind == "med":
        return ents.pick("meds")
    if kind == "city":
        return ents.pick("cities")
    raise KeyError(f"unknown value type {kind!r}")


def distinct_values(kind: str, rng: random.Random, ents: EntitySampler, n: int = 2) -> list[str]:
    """``n`` different values of one type (raises if the type cannot supply them)."""
    out: list[str] = []
    for _ in range(200):
        v = value(kind, rng, ents)
        if v not in out:
            out.append(v)
            if len(out) == n:
                return out
    raise RuntimeError(f"value type {kind!r} cannot supply {n} distinct values")
