#!/usr/bin/python3
"""The Ansible config templates must carry exactly the keys of the daemons'
documented default files, with the same default values (except the settings
that name a host or a path Ansible decides)."""
import sys
import tomllib

HOST_KEYS = {"listen", "address", "cluster_key_file"}


def flat(d, prefix=""):
    out = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(flat(v, prefix + k + "."))
        else:
            out[prefix + k] = v
    return out


def main(rendered, shipped):
    with open(rendered, "rb") as f:
        r = flat(tomllib.load(f))
    with open(shipped, "rb") as f:
        s = flat(tomllib.load(f))
    problems = []
    for k in sorted(set(s) - set(r)):
        problems.append(f"{rendered}: key {k} of {shipped} is missing")
    for k in sorted(set(r) - set(s)):
        problems.append(f"{rendered}: key {k} is not a setting of {shipped}")
    for k in sorted(set(r) & set(s)):
        if k.split(".")[-1] in HOST_KEYS:
            continue
        if r[k] != s[k]:
            problems.append(f"{rendered}: {k} = {r[k]!r}, the daemon's default is {s[k]!r}")
    for p in problems:
        print(p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
