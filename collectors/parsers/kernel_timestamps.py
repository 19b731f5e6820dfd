"""Kernel log timestamps: every stamp form a kernel log line reaches us with, split from
the message (plain ``dmesg``, ``-T``, ``-H``, ``--time-format iso``, ``-x`` levels,
``/dev/kmsg`` records, journal ``short*`` forms, syslog with localized month names,
``talosctl dmesg``), plus the host/``kernel:`` prefixes and paste quoting around them."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone

# --------------------------------------------------------------------------- months

# Abbreviated (and a few full) month names as glibc locales print them in syslog,
# journal and dmesg -T stamps. Keys are lower case without a trailing dot.
_MONTH_NAMES: dict[int, str] = {
    1: "jan january sty stycznia styczeń ene enero gen gennaio janv janvier janeiro januar "
    "januari jän jänner led oca tammi",
    2: "feb february lut lutego luty fev févr fevr février febrero febbraio februar februari "
    "úno uno şub sub helmi",
    3: "mar march marca marzec mär märz maerz mrt maart mars marzo bře bre maalis",
    4: "apr april kwi kwietnia kwiecień abr abril avr avril aprile dub nis huhti",
    5: "may maj maja mai mei mag maggio mayo kvě kve touko",
    6: "jun june juni junio cze czerwca czerwiec juin giu giugno čen cen haz kesä",
    7: "jul july juli julio lip lipca lipiec juil juillet lug luglio čec cec tem heinä",
    8: "aug august augusti sie sierpnia sierpień ago agosto août aout srp ağu agu elo",
    9: "sep sept september septiembre settembre wrz września wrzesień set zář zar eyl syys",
    10: "oct october oktober octubre ottobre okt paź paz października październik out říj "
    "rij eki loka",
    11: "nov november noviembre novembre lis listopada listopad kas marras",
    12: "dec december dezember diciembre dicembre dic dez déc gru grudnia grudzień pro ara joulu",
}
# Russian / Ukrainian forms (Cyrillic letters look like Latin ones, hence the noqa).
_MONTH_NAMES_CYRILLIC: dict[int, str] = {
    1: "янв січ",
    2: "фев лют",
    3: "мар бер",  # noqa: RUF001
    4: "апр кві квіт",
    5: "мая май тра трав",
    6: "июн чер черв",
    7: "июл лип",
    8: "авг сер серп",  # noqa: RUF001
    9: "сен вер вере",
    10: "окт жов жовт",
    11: "ноя лис лист",
    12: "дек гру груд",  # noqa: RUF001
}
_MONTHS: dict[str, int] = {
    name: num
    for table in (_MONTH_NAMES, _MONTH_NAMES_CYRILLIC)
    for num, names in table.items()
    for name in names.split()
}
# CJK journals print "4月" / "4월".
_CJK_MONTH = re.compile(r"(\d{1,2})\s*[月월]")
# A month token: a word (any script, optional trailing dot) or the CJK form.
_MON = r"(?:[^\W\d_]{3,12}\.?|\d{1,2}\s*[月월])"


def month_number(token: str) -> int | None:
    """Month 1-12 of a (possibly localized) month name, or None."""
    tok = token.strip().lower().rstrip(".")
    if m := _CJK_MONTH.fullmatch(tok):
        num = int(m.group(1))
        return num if 1 <= num <= 12 else None
    return _MONTHS.get(tok)


# --------------------------------------------------------------------------- stamps

_FACILITIES = r"(?:kern|user|mail|daemon|auth|syslog|lpr|news|uucp|cron|authpriv|ftp|local[0-7])"
_LEVELS = r"(?:emerg|alert|crit|err|warn|warning|notice|info|debug)"
# dmesg -x / talosctl dmesg: "[node: ]kern  :err   : ..."
_LEVEL_PREFIX = re.compile(rf"^(?:[\w.:\[\]-]+:\s+)?{_FACILITIES}\s*:\s*{_LEVELS}\s*:\s?")
_PRIORITY = re.compile(r"^<\d{1,3}>")
_KMSG = re.compile(r"^\d{1,3},\d+,(?P<us>\d+),[^;]*;(?P<rest>.*)$")
_MONO = re.compile(r"^\[\s*(?P<s>\d+\.\d+)(?:\s*<\s*[\d.]+\s*>)?\s*\]:?\s?")
# dmesg -H / --time-format reltime "[  +0.000844]"; --time-format delta "[<    0.000844>]"
_REL = re.compile(r"^\[\s*(?:<\s*(?P<delta>\d+\.\d+)\s*>|(?P<rel>[+-]\s*\d+\.\d+))\s*\]\s?")
# dmesg -H prints "[Nov30 01:02]" before the first line of a new minute.
_HUMAN_MIN = re.compile(
    rf"^\[(?P<text>(?P<mon>{_MON})\s?(?P<d>\d{{1,2}}) (?P<H>\d{{2}}):(?P<M>\d{{2}}))\]\s?"
)
_CTIME = re.compile(
    rf"^\[\s*(?P<text>(?:[^\W\d_]{{2,12}}\.?,?\s+)?(?P<mon>{_MON})\s+(?P<d>\d{{1,2}})\.?\s+"
    r"(?P<H>\d{1,2}):(?P<M>\d{2}):(?P<S>\d{2})\s+(?P<Y>\d{4}))\s*\]\s?"
)
_ISO_BODY = r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?"
_ISO_PARTS = re.compile(
    r"(?P<Y>\d{4})-(?P<m>\d{2})-(?P<d>\d{2})[T ](?P<H>\d{2}):(?P<M>\d{2}):(?P<S>\d{2})"
    r"(?:[.,](?P<f>\d+))?(?P<tz>Z|[+-]\d{2}:?\d{2})?"
)
_BRACKET_ISO = re.compile(rf"^\[(?P<iso>{_ISO_BODY})\]:?\s?")
_BARE_ISO = re.compile(rf"^(?P<iso>{_ISO_BODY})\s")
_SHORT_FULL = re.compile(
    r"^(?:[^\W\d_]{2,3}\s+)?(?P<date>\d{4}-\d{2}-\d{2}) (?P<time>\d{2}:\d{2}:\d{2}(?:\.\d+)?)"
    r"(?: (?P<tz>[A-Z]{2,5}|[+-]\d{4}))?\s+(?P<host>\S+)\s+(?P<ident>[^\s:\[]+)(?:\[\d+\])?:\s?"
)
_SYSLOG = re.compile(
    rf"^(?P<text>(?P<mon>{_MON})\s+(?P<d>\d{{1,2}})\s+(?P<H>\d{{2}}):(?P<M>\d{{2}}):(?P<S>\d{{2}})"
    r"(?:\.(?P<f>\d+))?)\s+(?P<host>\S+)\s+(?P<ident>[^\s:\[]+)(?:\[\d+\])?:\s?"
)
_KERNEL_HOST = re.compile(r"^\S+\s+kernel(?:\[\d+\])?:\s?")
# journalctl -o short-unix: "1714557600.123456 host kernel: "
_UNIX = re.compile(r"^(?P<epoch>\d{9,11}(?:\.\d+)?)\s+(?P<host>\S+)\s+kernel(?:\[\d+\])?:\s?")
# CONFIG_PRINTK_CALLER adds "[ T1234]" / "[C3]" after the stamp
_CALLER = re.compile(r"^\[\s*[TC]\d+\]\s?")
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_BARE_KERNEL = re.compile(r"^kernel(?:\[\d+\])?:\s?")
_QUOTES = ('"', "'", "`")


def _strip_closing_quote(s: str, quote: str) -> str:
    """The line without the quote that closes it (and a list comma after it)."""
    end = s.rstrip()
    if end.endswith(","):
        end = end[:-1].rstrip()
    return end[:-1] if end.endswith(quote) else s


def closing_quote_stripped(s: str, quote: str) -> str:
    """A wrapped quoted line's last part without its closing quote."""
    return _strip_closing_quote(s, quote) if quote else s


@dataclass(slots=True)
class Line:
    """One log line: its number, the line as read, and the message with its stamp split off."""

    no: int
    raw: str
    text: str
    time: datetime | None = None
    time_text: str | None = None
    monotonic_s: float | None = None
    stamped: bool = False
    quote: str = ""  # the quote a pasted line was wrapped in (its closing one is not text)


def _tz(text: str | None) -> timezone | None:
    if not text:
        return None
    if text == "Z":
        return UTC
    sign = -1 if text[0] == "-" else 1
    digits = text[1:].replace(":", "")
    return timezone(sign * timedelta(hours=int(digits[:2]), minutes=int(digits[2:4])))


def parse_iso(text: str) -> datetime | None:
    """An ISO 8601 stamp with any fraction length and ',' or '.' before it."""
    text = text.strip()
    if len(text) >= 19 and text[10] in "T " and text[4] == "-":
        try:  # the C parser reads every form the pattern below does, much faster
            return datetime.fromisoformat(text)
        except ValueError:
            pass
    m = _ISO_PARTS.fullmatch(text)
    if not m:
        return None
    frac = int(((m.group("f") or "") + "000000")[:6])
    try:
        return datetime(
            int(m.group("Y")),
            int(m.group("m")),
            int(m.group("d")),
            int(m.group("H")),
            int(m.group("M")),
            int(m.group("S")),
            frac,
            tzinfo=_tz(m.group("tz")),
        )
    except ValueError:
        return None


def _naive_local(dt: datetime) -> datetime:
    return dt.astimezone().replace(tzinfo=None) if dt.tzinfo else dt


def _guess_year(month: int, day: int, year: int | None, now: datetime | None) -> int | None:
    """The year of a stamp printed without one: ``year`` if given, else the year of
    ``now`` (the previous one when that would put the stamp in the future)."""
    if year is not None:
        return year
    if now is None:
        return None
    local_now = _naive_local(now)
    y = local_now.year
    try:
        if datetime(y, month, day) > local_now + timedelta(days=2):
            y -= 1  # a December stamp read in January
    except ValueError:
        return y
    return y


def _local_time(
    mon: str,
    day: str,
    hms: tuple[str, str, str],
    frac: str | None,
    year: int | None,
    now: datetime | None,
) -> datetime | None:
    month = month_number(mon)
    if month is None:
        return None
    y = _guess_year(month, int(day), year, now)
    if y is None:
        return None
    micro = int(((frac or "") + "000000")[:6])
    try:
        return datetime(y, month, int(day), int(hms[0]), int(hms[1]), int(hms[2]), micro)
    except ValueError:
        return None


# A pasted "line" longer than this is junk or a dump; only its head is read.
MAX_LINE_CHARS = 16_384
# Message parts a :class:`LineSplitter` remembers; a storm repeats few, so a small memo
# holds them and a log of all-different lines only pays one dict lookup per line.
MEMO_SIZE = 4096


class LineSplitter:
    """Splits raw log lines into :class:`Line` s: the one place a line is cleaned (CR, NUL,
    length cap) and its stamp separated from its message.

    Each line's stamp is read on its own (stamps differ line by line); what follows it
    (host and ``kernel:`` prefixes, an inner dmesg stamp, a printk caller id) is memoised
    by text, so identical messages are taken apart once."""

    __slots__ = ("_memo", "now", "year")

    def __init__(self, year: int | None = None, now: datetime | None = None) -> None:
        self.year = year
        self.now = now
        self._memo: dict[tuple[str, bool, bool], tuple[str, float | None]] = {}

    def line(self, no: int, raw: str) -> Line | None:
        """Line ``no`` cleaned and split; None when it holds nothing but blanks."""
        if raw.endswith("\r"):
            raw = raw.rstrip("\r")
        if "\x00" in raw:
            raw = raw.replace("\x00", "")
        if len(raw) > MAX_LINE_CHARS:
            raw = raw[:MAX_LINE_CHARS]
        if not raw or (raw[0].isspace() and not raw.strip()):
            return None
        return self.split(no, raw)

    def split(self, no: int, raw: str) -> Line:
        """Separate the timestamp (and host/level prefixes) from the message of one line."""
        ln = Line(no=no, raw=raw, text=raw)
        s = _ANSI.sub("", raw) if "\x1b" in raw else raw
        if s[:1] in _QUOTES or (s[:1] in " \t" and s.lstrip()[:1] in _QUOTES):
            # a line pasted as a quoted string: "[ 5.0] NVRM: Xid ...", or a JSON array item
            s = s.lstrip()
            ln.quote, s = s[0], s[1:]
            s = _strip_closing_quote(s, ln.quote)
        if s[:1] == "<" and (m := _PRIORITY.match(s)):
            s = s[m.end() :]
        first = s[:1]
        if first.isdigit() and "," in s[1:4] and (m := _KMSG.match(s)):
            ln.time_text, ln.monotonic_s, ln.stamped = m.group("us"), int(m.group("us")) / 1e6, True
            ln.text = m.group("rest")
            return ln
        # an ISO date ("2026-11-28T...", "2026-11-28 ...") cannot open a level prefix
        iso_date = first.isdigit() and s[4:5] == "-"
        if iso_date and (m := _BARE_ISO.match(s)):
            # journalctl -o short-iso and dmesg --time-format iso, what the collector reads
            ln.time_text = iso = m.group("iso")
            ln.time, ln.stamped = parse_iso(iso), True
            return self._message(ln, s[m.end() :], False)
        if not iso_date and (m := _LEVEL_PREFIX.match(s)):
            s, ln.stamped = s[m.end() :], True
            first = s[:1]
        year, now = self.year, self.now
        host_fields = False
        # every form in [brackets] starts with "[", the bare ISO form with a digit: the first
        # character rules most patterns out (the order among the others still decides)
        bracket, digit = first == "[", first.isdigit()
        m = None
        if bracket and (m := _MONO.match(s)):
            ln.time_text, ln.monotonic_s = m.group("s"), float(m.group("s"))
        elif bracket and (m := _REL.match(s)):
            ln.time_text = (m.group("rel") or m.group("delta")).replace(" ", "")
        elif bracket and (m := _HUMAN_MIN.match(s)):
            ln.time_text = m.group("text")
            ln.time = _local_time(m["mon"], m["d"], (m["H"], m["M"], "0"), None, year, now)
        elif bracket and (m := _CTIME.match(s)):
            ln.time_text = m.group("text")
            y = int(m.group("Y"))
            ln.time = _local_time(m["mon"], m["d"], (m["H"], m["M"], m["S"]), None, y, now)
        elif (bracket and (m := _BRACKET_ISO.match(s))) or (digit and (m := _BARE_ISO.match(s))):
            ln.time_text, ln.time = m.group("iso"), parse_iso(m.group("iso"))
        elif bracket:
            pass  # no stamp: "[" opens the message (a printk caller id, a pasted fragment)
        elif m := _SHORT_FULL.match(s):
            ln.time_text = s[: m.start("host")].strip()
            tz = m.group("tz")
            ln.time = parse_iso(f"{m.group('date')}T{m.group('time')}")
            if ln.time is not None and tz in ("UTC", "GMT"):
                ln.time = ln.time.replace(tzinfo=UTC)
            elif ln.time is not None and tz and tz[0] in "+-":
                ln.time = ln.time.replace(tzinfo=_tz(tz))
            host_fields = True
        elif digit and (m := _UNIX.match(s)):
            ln.time_text = m.group("epoch")
            try:
                ln.time = datetime.fromtimestamp(float(m.group("epoch")), UTC)
            except (OverflowError, OSError, ValueError):
                ln.time = None
            host_fields = True
        elif m := _SYSLOG.match(s):
            ln.time_text = m.group("text")
            ln.time = _local_time(m["mon"], m["d"], (m["H"], m["M"], m["S"]), m["f"], year, now)
            host_fields = True
        if m is None:
            if s[:6] == "kernel" and (k := _BARE_KERNEL.match(s)):
                s = s[k.end() :]  # a journal line pasted without its stamp and host
            ln.text = s
            return ln
        ln.stamped = True
        return self._message(ln, s[m.end() :], host_fields)

    def _message(self, ln: Line, rest: str, host_fields: bool) -> Line:
        """``ln`` with its message: ``rest`` (what follows the stamp), taken apart once per
        text."""
        key = (rest, host_fields, ln.monotonic_s is None)
        done = self._memo.get(key)
        if done is None:
            done = _message(*key)
            if len(self._memo) >= MEMO_SIZE:
                self._memo.clear()
            self._memo[key] = done
        ln.text, inner = done
        if inner is not None:
            ln.monotonic_s = inner
        return ln


def _message(s: str, host_fields: bool, want_mono: bool) -> tuple[str, float | None]:
    """The message after a stamp, without the prefixes that may follow the stamp, and the
    dmesg seconds stamp found among them (when ``want_mono``)."""
    mono = None
    if not host_fields and ((k := _KERNEL_HOST.match(s)) or (k := _BARE_KERNEL.match(s))):
        s = s[k.end() :]  # journal short-iso / short-monotonic: "host kernel: "
    # syslog and journal lines may keep the dmesg [seconds] stamp inside the message
    if want_mono and s[:1] == "[" and (k := _MONO.match(s)):
        mono = float(k.group("s"))
        s = s[k.end() :]
    if s[:1] == "[" and (k := _CALLER.match(s)):
        s = s[k.end() :]
    return s, mono


def split_stamp(no: int, raw: str, year: int | None, now: datetime | None) -> Line:
    """One line split by a fresh :class:`LineSplitter` (for callers reading a few lines)."""
    return LineSplitter(year, now).split(no, raw)


def unquoted(message: str, ln: Line) -> str:
    """A message without the closing quote of a line pasted as a quoted string."""
    if ln.quote:
        return closing_quote_stripped(message, ln.quote)
    for q in ('"', "'"):
        if message.endswith((q, q + ",")) and message.count(q) % 2 == 1 and q in ln.raw[:-1]:
            return closing_quote_stripped(message, q)
    return message


def age_s(now: datetime, t: datetime) -> float:
    """Seconds from ``t`` to ``now``; a naive stamp is local time."""
    if (now.tzinfo is None) != (t.tzinfo is None):
        now, t = now.astimezone(), t.astimezone()
    return (now - t).total_seconds()
