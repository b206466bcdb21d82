"""What a GPU-hour costs: the prices file named by RECKON_PRICES_FILE (TOML), read against the
hardware catalog so a GPU may be named by any of its aliases. A currency is a label (ISO 4217
style): Reckon never converts one into another, and never adds amounts of two currencies.

    currency = "USD"                  # the default of every entry (USD when left out)

    [gpu.h100-sxm]                    # a catalog name or alias (`reckon hardware`)
    price_per_gpu_hour = 2.49

    [gpu.mi300x]
    price_per_gpu_hour = 2.10
    currency = "EUR"                  # this entry's own currency

A mistake in the file (not TOML, an unknown GPU or key, a negative price, two entries for one
GPU) is one InputError naming the file and the entry: a read command exits 2 and `reckon
serve` refuses to start. No I/O beyond reading the one file."""

from __future__ import annotations

import math
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from service.domain.errors import InputError
from service.domain.hardware import Catalog

PRICES_FILE_VARIABLE = "RECKON_PRICES_FILE"
DEFAULT_CURRENCY = "USD"  # as `--price-per-gpu-hour` without `--currency`
_CURRENCY = re.compile(r"[A-Z]{3}")
_TOP_KEYS = ("currency", "gpu")
_ENTRY_KEYS = ("price_per_gpu_hour", "currency")


@dataclass(frozen=True)
class Price:
    """What one GPU-hour costs, in `currency` (a label: never converted)."""

    price_per_gpu_hour: float
    currency: str


@dataclass(frozen=True)
class PriceTable:
    """The prices file, read: a price per catalog GPU name; `source` names the file."""

    prices: Mapping[str, Price] = field(default_factory=dict)
    currency: str = DEFAULT_CURRENCY
    source: str = ""

    def price_of(self, gpu: str) -> Price | None:
        """The price of a GPU by its catalog name (as estimates and reconciliations store
        it), None when the file has none."""
        return self.prices.get(gpu)


def currency_code(value: object, where: str) -> str:
    """A 3-letter code (`usd` is read as USD); anything else is an InputError."""
    text = value.strip().upper() if isinstance(value, str) else ""
    if not _CURRENCY.fullmatch(text):
        raise InputError(f"{where}: currency must be a 3-letter code like USD, got {value!r}")
    return text


def load_prices(path: Path, catalog: Catalog) -> PriceTable:
    """Read and check a prices file (the module's docstring shows one)."""
    shown = f"prices file {path}"
    try:
        document = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as error:
        raise InputError(
            f"cannot read {shown} ({PRICES_FILE_VARIABLE}): {error.strerror}"
        ) from None
    except UnicodeDecodeError:
        raise InputError(f"{shown} is not UTF-8 text") from None
    except tomllib.TOMLDecodeError as error:
        raise InputError(f"{shown} is not valid TOML: {error}") from None
    return read_prices(document, catalog, shown=shown, source=str(path))


def read_prices(
    document: Mapping[str, object], catalog: Catalog, *, shown: str, source: str = ""
) -> PriceTable:
    """The table of a parsed prices document; `shown` starts every error message."""
    unknown = [key for key in document if key not in _TOP_KEYS]
    if unknown:
        raise InputError(f"{shown}: unknown key {unknown[0]!r}; use currency and [gpu.NAME]")
    default = currency_code(document.get("currency", DEFAULT_CURRENCY), shown)
    table = document.get("gpu")
    if not isinstance(table, dict) or not table:
        raise InputError(f"{shown} has no [gpu.NAME] tables (price_per_gpu_hour = ...)")
    prices: dict[str, Price] = {}
    named: dict[str, str] = {}
    for name, entry in table.items():
        where = f"{shown}, gpu {name!r}"
        canonical = _gpu_name(catalog, name, where)
        if canonical in prices:
            raise InputError(f"{where}: {canonical} is priced twice (also as {named[canonical]!r})")
        prices[canonical] = _entry(entry, default, where)
        named[canonical] = name
    return PriceTable(prices, default, source)


def _gpu_name(catalog: Catalog, name: str, where: str) -> str:
    try:
        return catalog.resolve(name).name
    except InputError as error:
        raise InputError(f"{where}: {error}") from None


def _entry(entry: object, default: str, where: str) -> Price:
    if not isinstance(entry, dict):
        raise InputError(f"{where}: expected a table with price_per_gpu_hour = ...")
    unknown = [key for key in entry if key not in _ENTRY_KEYS]
    if unknown:
        raise InputError(
            f"{where}: unknown key {unknown[0]!r}; use price_per_gpu_hour and currency"
        )
    value = entry.get("price_per_gpu_hour")
    if value is None:
        raise InputError(f"{where}: needs price_per_gpu_hour = ... (per GPU, per hour)")
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InputError(f"{where}: price_per_gpu_hour must be a number, got {value!r}")
    if not math.isfinite(value) or value < 0:
        raise InputError(f"{where}: price_per_gpu_hour must be zero or more, got {value!r}")
    currency = currency_code(entry.get("currency", default), where)
    return Price(float(value), currency)
