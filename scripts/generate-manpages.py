#!/usr/bin/env python3
"""Writes capfleet's manual pages from the built binary: capfleet(1) and one page a subcommand
(capfleet-record-start(1), ...), as ArgumentParser's generate-manual plugin names them.

    scripts/generate-manpages.py BINARY OUTDIR

The text is the binary's own help (`--experimental-dump-help`: every command's abstract,
discussion, arguments and options), so the pages cannot drift from `capfleet --help`. A script
rather than the generate-manual plugin because the plugin builds the whole package again in
release mode; this needs only the release binary that scripts/build-deb.sh packages.
SOURCE_DATE_EPOCH, when set, dates the pages (reproducible builds); else today.
"""
import datetime
import json
import os
import re
import subprocess
import sys

MAINTAINER = "CaptureFleet maintainers <maintainers@capturefleet.org>"


def roff(text):
    """Plain text as roff: backslashes and hyphens escaped, `code` in bold, no line that
    roff would read as a request."""
    text = text.replace("\\", "\\e").replace("-", "\\-")
    text = re.sub(r"`([^`]+)`", r"\\fB\1\\fR", text)
    return "\n".join(("\\&" + line) if line.startswith((".", "'")) else line for line in text.split("\n"))


def prose(text):
    """A help text's paragraphs: lines at the margin are filled; indented lines (examples) kept
    as written."""
    out, block, paragraph = [], [], []
    # A block right under its paragraph ("Environment:") stays attached to it.
    attached = False

    def flush_block():
        if block:
            out.extend(([] if attached else [".PP"]) + [".RS 2", ".nf"] + [roff(line.strip()) for line in block] + [".fi", ".RE"])
            block.clear()

    for line in text.strip("\n").split("\n") + [""]:
        if line.startswith((" ", "\t")) and line.strip():
            if paragraph:
                out.extend([".PP", roff(" ".join(paragraph))])
                paragraph = []
                attached = True
            elif not block:
                attached = False
            block.append(line)
        elif line.strip():
            flush_block()
            paragraph.append(line.strip())
        else:
            flush_block()
            if paragraph:
                out.extend([".PP", roff(" ".join(paragraph))])
                paragraph = []
    return out


def visible(arguments, root):
    """The arguments a reader can give; --version only where it means something, at the root."""
    return [a for a in arguments or [] if a.get("shouldDisplay", True)
            and (root or (a.get("preferredName") or {}).get("name") != "version")]


def name_text(name):
    return ("--" if name["kind"] == "long" else "-") + name["name"]


def usage(argument):
    """How an argument is written: `--for <for>`, `-o, --output <output>`, `<devices> ...`."""
    value = "\\fI<" + roff(argument.get("valueName") or "value") + ">\\fR"
    if argument["kind"] == "positional":
        text = value
    else:
        text = ", ".join("\\fB" + roff(name_text(n)) + "\\fR" for n in argument.get("names") or [])
        if argument["kind"] == "option":
            text += " " + value
    return text + (" ...\\&" if argument.get("isRepeating") else "")


def synopsis_word(argument):
    if argument["kind"] == "positional":
        word = "\\fI<" + roff(argument.get("valueName") or "value") + ">\\fR"
    else:
        # A paired flag's names both: [--discover|--no-discover].
        names = argument["names"] if argument.get("paired") else [argument["preferredName"]]
        word = "|".join("\\fB" + roff(name_text(n)) + "\\fR" for n in names)
        if argument["kind"] == "option":
            word += " \\fI<" + roff(argument.get("valueName") or "value") + ">\\fR"
    if argument.get("isRepeating"):
        word += " ...\\&"
    return "[" + word + "]" if argument.get("isOptional") else word


def described(argument):
    text = argument.get("abstract") or ""
    if argument.get("allValues") and argument["kind"] == "option":
        text += " (values: " + ", ".join(argument["allValues"]) + ")"
    if argument.get("defaultValue") not in (None, ""):
        text += " (default: " + argument["defaultValue"] + ")"
    lines = [roff(text.strip())] if text.strip() else []
    if argument.get("discussion"):
        lines += prose(argument["discussion"])
    return lines


def paired_flags(arguments):
    """An inversion (--discover and --no-discover, one help text) as one entry with both names."""
    merged = []
    for argument in arguments:
        previous = merged[-1] if merged else None
        if (previous and argument["kind"] == previous["kind"] == "flag" and argument.get("abstract") == previous.get("abstract")
                and argument["preferredName"]["name"] == "no-" + previous["preferredName"]["name"]):
            merged[-1] = dict(previous, names=previous["names"] + argument["names"], paired=True)
        else:
            merged.append(argument)
    return merged


def page_name(path):
    return "-".join(path)


def commands(command, path=()):
    """Every command to document, depth first, with its path of names from the root."""
    path = path + (command["commandName"],)
    yield path, command
    for child in command.get("subcommands") or []:
        if child.get("shouldDisplay", True) and child["commandName"] != "help":
            yield from commands(child, path)


def page(path, command, version, date, parent):
    name = page_name(path)
    children = [c for c in command.get("subcommands") or [] if c.get("shouldDisplay", True) and c["commandName"] != "help"]
    arguments = visible(command.get("arguments"), root=parent is None)
    abstract = command.get("abstract") or ""
    lines = [
        f'.TH "{name.upper()}" "1" "{date}" "capfleet {version}" "CaptureFleet Manual"',
        # Neither hyphenated nor justified: a path or an option broken at the margin, or spread
        # out to fill it, reads as something else.
        ".nh", ".ad l",
        ".SH NAME",
        f"{roff(name)} \\- {roff(abstract.rstrip('.'))}",
        ".SH SYNOPSIS",
        "\\fB" + roff(" ".join(path)) + "\\fR" + (" \\fI<subcommand>\\fR" if children and not command.get("defaultSubcommand") else
                                                 " [\\fI<subcommand>\\fR]" if children else ""),
    ]
    positional = [a for a in arguments if a["kind"] == "positional"]
    named = paired_flags([a for a in arguments if a["kind"] != "positional"])
    lines += [synopsis_word(a) for a in paired_flags(arguments) if a["kind"] != "flag" or a["preferredName"]["name"] != "help"]
    lines += [".SH DESCRIPTION", roff(abstract)]
    if command.get("discussion"):
        lines += prose(command["discussion"])
    for title, group in (("ARGUMENTS", positional), ("OPTIONS", named)):
        if group:
            lines.append(".SH " + title)
            for argument in group:
                lines += [".TP", usage(argument)] + (described(argument) or [""])
    if children:
        lines.append(".SH COMMANDS")
        for child in children:
            default = " (the default)" if command.get("defaultSubcommand") == child["commandName"] else ""
            lines += [".TP", "\\fB" + roff(child["commandName"]) + "\\fR" + default,
                      roff(child.get("abstract") or ""),
                      ".br", f"See \\fB{roff(page_name(path + (child['commandName'],)))}\\fR(1)."]
    if not parent:
        lines += [".SH REPORTING BUGS", roff("Write to " + MAINTAINER + ".")]
    see_also = ([parent] if parent else []) + [page_name(path + (c["commandName"],)) for c in children]
    if see_also:
        lines += [".SH SEE ALSO", ",\n".join(f"\\fB{roff(p)}\\fR(1)" for p in see_also)]
    return "\n".join(lines) + "\n"


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: generate-manpages.py BINARY OUTDIR")
    binary, outdir = sys.argv[1], sys.argv[2]
    info = json.loads(subprocess.run([binary, "--experimental-dump-help"], check=True, capture_output=True, text=True).stdout)
    version = subprocess.run([binary, "--version"], check=True, capture_output=True, text=True).stdout.split()[0]
    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    when = datetime.datetime.fromtimestamp(int(epoch), datetime.timezone.utc) if epoch else datetime.datetime.now(datetime.timezone.utc)
    date = when.strftime("%Y-%m-%d")
    os.makedirs(outdir, exist_ok=True)
    written = 0
    for path, command in commands(info["command"]):
        parent = page_name(path[:-1]) if len(path) > 1 else None
        with open(os.path.join(outdir, page_name(path) + ".1"), "w", encoding="utf-8") as out:
            out.write(page(path, command, version, date, parent))
        written += 1
    print(f"{written} manual pages in {outdir}")


if __name__ == "__main__":
    main()
