#!/usr/bin/env python3
# SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause
"""The man pages, checked against the code they document, so they cannot drift.

mosquitto-dlq(7), from man/mosquitto-dlq.7.md:
  - OPTIONS documents exactly the options the plugin accepts: the names of
    the single_options table in plugin/config/config.c, and policy. That
    table is static and nothing lists it at run time (the parser only says
    "unknown option"), so its names are read from the source; everything
    else is shown by running the plugin's own parser (config__parse, through
    tests/docs/config_probe.c): a name the page documents and the code does
    not know is refused, with the parser's message; an unknown name is
    refused; each option's "Default:" value, fed to the parser, gives the
    same settings as leaving the option out, and the DLQ_DEFAULT_*
    constants of include/mosquitto_dlq.h are what the documented defaults
    parse to;
  - POLICIES documents exactly the keys of policy_keys[] in
    plugin/config/policy_parse.c (read from the source for the same
    reason), as the parser's own "known:" list names them; a documented
    default changes nothing, a key documented as required is required;
  - every configuration example (the plugin_opt_ lines of each code block
    outside SYNOPSIS, with the JSON policy document of POLICIES as the
    policy file) is accepted, and every option is fed a documented value
    at least once;
  - PROPERTIES names exactly the DLQ_PROP_* names of the header, and THE
    NACK PROTOCOL its control topics and exactly its commands.
dlqctl(1), from man/dlqctl.1.md, against the built dlqctl:
  - COMMANDS and OPTIONS name exactly the commands and options of
    `dlqctl --help` (and --help);
  - the "Options:" sentence of each command names exactly the options
    dlqctl takes with that command beyond those every command takes (found
    by running dlqctl with each against a socket that does not exist: a
    wrong pair is a usage error, exit 2, a right one fails to connect,
    exit 1);
  - EXIT STATUS names the codes of the usage text, and every line of
    EXAMPLES gets past dlqctl's parser;
  - the user properties dlqctl writes (DLQCTL_PROP_* of tools/dlqctl.h)
    are named.
Both generated pages render without a warning (man --warnings, as lintian
runs it) and lexgrog reads their NAME; every name checked above is in the
rendered text.

Usage: check_man.py --root DIR --probe CONFIG_PROBE --dlqctl DLQCTL
       --page BUILT.7 --page BUILT.1 [--man MAN --lexgrog LEXGROG]
       [--self-test]
--self-test also plants each kind of drift in a copy of the sources (and of
a built page) and checks that each is reported. Exits 0 when the pages keep
to the code, 1 (every problem listed) when not, 77 (skipped) when all else
passed but man or lexgrog is missing, 2 on a usage error.
"""
import argparse
import ast
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile

# The policy every probe run without one gets, as the plugin refuses (or
# used to refuse) a configuration without any. Its topics are nobody's.
BASE_POLICY = 'plugin_opt_policy man-check/# max_attempts=1 dead_letter=man-check-dead'
UNKNOWN_OPTION = 'plugin_opt_man_check_no_such_option 1'
# A socket that is not there: dlqctl gets past its parser, then fails.
NO_BROKER = ['--unix', '/nonexistent/dlq-man-check.sock', '--timeout', '0.1']
# A value for each placeholder of dlqctl's usage text.
SAMPLE_VALUES = {'ORDER': 'newest', 'CAUSE': 'nack', 'TIME': '1', 'TOPIC': 'man-check/topic', 'SECONDS': '10', 'N': '1', 'TEXT': 'x', 'FILTER': 'a/#', 'PREFIX': 'p/',
                 'ID': 'man-check', 'PATH': '/nonexistent', 'HOST': 'localhost', 'PORT': '1883',
                 'USER': 'u', 'PASSWORD': 'p'}

md2man = None  # man/md2man.py, imported from --root


class Run:
    """Runs the programs, once per distinct input (the self-test repeats them)."""

    def __init__(self):
        self.cache = {}

    def __call__(self, argv, stdin=''):
        key = (tuple(argv), stdin)
        if key not in self.cache:
            p = subprocess.run(argv, input=stdin, capture_output=True, text=True,
                               env=dict(os.environ, LC_ALL='C.UTF-8', MANROFFSEQ='', MANWIDTH='80'))
            self.cache[key] = (p.returncode, p.stdout, p.stderr)
        return self.cache[key]


run = Run()


def spans(text):
    """The code spans of markdown text."""
    return re.findall(r'`([^`]*)`', text)


def section_text(section):
    """All the text of a section, markup and all: paragraphs, items, terms, code."""
    out = []
    for b in section.blocks:
        if b.kind in ('para', 'sub'):
            out.append(b.text)
        elif b.kind == 'code':
            out += b.lines
        elif b.kind == 'bullets':
            out += b.items
        else:
            for term, parts, _ in b.items:
                out.append(term)
                out += [body if kind == 'para' else '\n'.join(body) for kind, body in parts]
    return '\n'.join(out)


def definitions(section):
    """(term, definition text, line) of every definition list item."""
    for b in section.blocks:
        if b.kind == 'defs':
            for term, parts, line in b.items:
                yield term, '\n'.join(body for kind, body in parts if kind == 'para'), line


def probe(a, lines):
    """config__parse on the lines: (accepted, {option: value}, [policy dicts], message)."""
    rc, out, err = run([a.probe], '\n'.join(lines) + '\n')
    if rc not in (0, 1):
        raise SystemExit('config_probe failed (%d): %s' % (rc, err.strip()))
    settings, policies = {}, []
    for line in out.splitlines():
        if line.startswith('option '):
            _, key, value = line.split(' ', 2)
            settings[key] = value
        elif line.startswith('policy '):
            policies.append(dict(f.split('=', 1) for f in line[len('policy '):].split('\t')))
    return rc == 0, settings, policies, out.strip()


def source_names(path, pattern, what):
    """The quoted names of the C initialiser pattern matches in path."""
    with open(path, encoding='utf-8') as f:
        m = re.search(pattern, f.read(), re.S)
    if not m:
        raise SystemExit('%s: %s not found: the check must learn its new shape' % (path, what))
    return re.findall(r'"(\w+)"', m.group(1))


def header_defines(path, prefix):
    """{NAME: value text} of the #defines of path whose names start with prefix."""
    with open(path, encoding='utf-8') as f:
        return dict(re.findall(r'^#define (%s\w+) (.+?)\s*$' % prefix, f.read(), re.M))


def c_number(text):
    """The value of a constant expression such as (64ull * 1024 * 1024): numbers,
    + and * only, so evaluating it runs nothing else."""
    tree = ast.parse(re.sub(r'(\d+)[uUlL]+', r'\1', text), mode='eval')
    for node in ast.walk(tree):
        if not isinstance(node, (ast.Expression, ast.BinOp, ast.Constant, ast.Mult, ast.Add)):
            raise ValueError(text)
    return eval(compile(tree, '<define>', 'eval'))


def example_configs(page):
    """(line, plugin_opt_ lines) of each code block outside SYNOPSIS, and the
    JSON policy documents, (line, text)."""
    configs, documents = [], []
    for section in page.sections:
        for b in section.blocks:
            if b.kind != 'code' or section.heading == 'SYNOPSIS':
                continue
            text = '\n'.join(b.lines)
            if text.lstrip().startswith('{'):
                try:
                    if 'policies' in json.loads(text):
                        documents.append((b.line, text))
                except ValueError:
                    pass
                continue
            opts = [l for l in b.lines if l.startswith('plugin_opt_')]
            if opts:
                configs.append((b.line, opts))
    return configs, documents


def check_options(a, page, policy_defaults, problems, fed):
    """OPTIONS against config.c's table and config__parse; the documented names."""
    root = a.root
    code = source_names(os.path.join(root, 'plugin/config/config.c'),
                        r'\} single_options\[\] = \{(.*?)\n\};', 'the single_options table')
    with open(os.path.join(root, 'plugin/config/config.c'), encoding='utf-8') as f:
        source = f.read()
    # The repeatable options, parsed apart from the table: one line each.
    for key in ('policy', 'collect'):
        if '!strcmp(key, "%s")' % key in source:
            code.append(key)
    documented = {}
    for term, text, line in definitions(page.section_named('OPTIONS')):
        names = [s for s in spans(term) if s.startswith('plugin_opt_')]
        if not names:
            problems.append('mosquitto-dlq(7) OPTIONS, line %d: the term %r names no plugin_opt_ option'
                            % (line, term))
            continue
        documented[names[0][len('plugin_opt_'):]] = (text, line)
    for key in sorted(set(code) - set(documented)):
        problems.append('plugin_opt_%s: accepted by the code (plugin/config/config.c) but not documented in '
                        'mosquitto-dlq(7) OPTIONS' % key)
    for section in page.sections:
        named = set(re.findall(r'\bplugin_opt_(\w+)', ' '.join(spans(section_text(section)))))
        for key in sorted(named - set(code) - set(documented) - {'OPTION'}):
            problems.append('plugin_opt_%s: named in mosquitto-dlq(7) %s but not an option of the code'
                            % (key, section.heading))
    ok, base, _, msg = probe(a, [BASE_POLICY])
    if not ok:
        raise SystemExit('config_probe refuses the base policy: %s' % msg)
    ok, _, _, msg = probe(a, [BASE_POLICY, UNKNOWN_OPTION])
    if ok or 'unknown option' not in msg:
        problems.append('config__parse does not refuse an unknown option as "unknown option": %s' % msg)
    for key, (text, line) in sorted(documented.items()):
        if key not in code:
            _, _, _, msg = probe(a, [BASE_POLICY, 'plugin_opt_%s 1' % key])
            problems.append('plugin_opt_%s: documented in mosquitto-dlq(7) OPTIONS (line %d) but not an option of '
                            'the code (config__parse: %s)' % (key, line, msg))
            continue
        m = re.search(r'Default: (none\b|`([^`]*)`)', text)
        if not m:
            problems.append('plugin_opt_%s: no "Default:" in mosquitto-dlq(7) OPTIONS (line %d)' % (key, line))
            continue
        if key != 'policy' and key not in base:
            problems.append('plugin_opt_%s: tests/docs/config_probe.c prints no setting for it: add one' % key)
            continue
        if m.group(2) is None:
            if key != 'policy' and base[key] != '-':
                problems.append('plugin_opt_%s: documented default none, but the code sets %s' % (key, base[key]))
            continue
        value = m.group(2)
        ok, settings, _, msg = probe(a, [BASE_POLICY, 'plugin_opt_%s %s' % (key, value)])
        if not ok:
            problems.append('plugin_opt_%s: the documented default `%s` is refused: %s' % (key, value, msg))
            continue
        fed.add(key)
        if settings != base:
            problems.append('plugin_opt_%s: the documented default `%s` is not the code\'s default: given, it sets '
                            '%s; left out, %s' % (key, value, settings[key], base[key]))
    check_default_constants(a, documented, policy_defaults, problems)
    return set(documented)


def check_default_constants(a, documented, policy_defaults, problems):
    """Each DLQ_DEFAULT_* is the parse of the documented default it names."""
    defines = header_defines(os.path.join(a.root, 'include/mosquitto_dlq.h'), 'DLQ_DEFAULT_')
    for name, text in sorted(defines.items()):
        key = re.sub(r'_ms$', '', name[len('DLQ_DEFAULT_'):].lower())
        want = c_number(text)
        if key in documented:
            m = re.search(r'Default: `([^`]*)`', documented[key][0])
            if not m:
                problems.append('%s: plugin_opt_%s has no documented default value' % (name, key))
                continue
            _, settings, _, _ = probe(a, [BASE_POLICY, 'plugin_opt_%s %s' % (key, m.group(1))])
            got = settings.get(key)
        elif key in policy_defaults:
            _, _, policies, _ = probe(a, ['%s %s=%s' % (BASE_POLICY, key, policy_defaults[key])])
            got = policies[0].get(key) if policies else None
        else:
            problems.append('%s: no documented option or policy key named %s' % (name, key))
            continue
        if got is None or int(got) != want:
            problems.append('%s is %d, but the documented default of %s parses to %s' % (name, want, key, got))


def check_policy_keys(a, page, problems):
    """POLICIES against policy_parse.c's keys and config__parse; {key: documented default}."""
    code = source_names(os.path.join(a.root, 'plugin/config/policy_parse.c'),
                        r'policy_keys\[K_COUNT\] = \{(.*?)\};', 'policy_keys[]')
    documented = {}
    for term, text, line in definitions(page.section_named('POLICIES')):
        names = spans(term)
        if names:
            documented[names[0].split('=')[0]] = (text, line)
    for key in sorted(set(code) - set(documented)):
        problems.append('policy key %s: accepted by the code (plugin/config/policy_parse.c) but not documented in '
                        'mosquitto-dlq(7) POLICIES' % key)
    for key in sorted(set(documented) - set(code)):
        problems.append('policy key %s: documented in mosquitto-dlq(7) POLICIES (line %d) but not a key of the code'
                        % (key, documented[key][1]))
    _, _, _, msg = probe(a, [BASE_POLICY + ' man_check_no_such_key=1'])
    m = re.search(r'\(known: ([^)]*)\)', msg)
    if not m or m.group(1).split(', ') != code:
        problems.append('the parser\'s message for an unknown policy key does not list policy_keys[] (%s): %s'
                        % (', '.join(code), msg))
    _, _, base, _ = probe(a, [BASE_POLICY])
    defaults = {}
    for key, (text, line) in sorted(documented.items()):
        if key not in code:
            continue
        m = re.search(r'Default: `([^`]*)`', text)
        if m:
            defaults[key] = m.group(1)
            ok, _, policies, msg = probe(a, ['%s %s=%s' % (BASE_POLICY, key, m.group(1))])
            if not ok:
                problems.append('policy key %s: the documented default `%s` is refused: %s' % (key, m.group(1), msg))
            elif policies != base:
                problems.append('policy key %s: the documented default `%s` is not the code\'s default: given, %s; '
                                'left out, %s' % (key, m.group(1), policies[0].get(key), base[0].get(key)))
        elif re.search(r'Default: none\b', text):
            # An optional key whose absence means "not set": the probe
            # prints it as none.
            if base[0].get(key) != 'none':
                problems.append('policy key %s: documented as "Default: none", but left out it is %s'
                                % (key, base[0].get(key)))
        elif re.search(r'\bRequired\.', text):
            line_without = ' '.join(w for w in BASE_POLICY.split(' ') if not w.startswith(key + '='))
            ok, _, _, msg = probe(a, [line_without])
            if ok or '%s is required' % key not in msg:
                problems.append('policy key %s: documented as required, but a policy without it gives: %s'
                                % (key, msg or 'accepted'))
        else:
            problems.append('policy key %s: neither "Default:" nor "Required." in mosquitto-dlq(7) POLICIES (line %d)'
                            % (key, line))
    return defaults


def check_examples(a, page, problems, fed):
    """Every configuration example is accepted; every option is fed once."""
    configs, documents = example_configs(page)
    if not documents:
        problems.append('mosquitto-dlq(7): no JSON policy document ({"policies": ...}) in a code block')
        return
    with tempfile.TemporaryDirectory() as tmp:
        policy_file = os.path.join(tmp, 'policies.json')
        for line, text in documents:
            with open(policy_file, 'w', encoding='utf-8') as f:
                f.write(text)
            ok, _, policies, msg = probe(a, ['plugin_opt_policy_file ' + policy_file])
            if not ok:
                problems.append('mosquitto-dlq(7) line %d: the policy document is refused: %s' % (line, msg))
            elif len(policies) != len(json.loads(text)['policies']):
                problems.append('mosquitto-dlq(7) line %d: the policy document gives %d policies'
                                % (line, len(policies)))
        for line, opts in configs:
            # A policy file named in an example is the document above.
            opts = [re.sub(r'^plugin_opt_policy_file .*', 'plugin_opt_policy_file ' + policy_file, o) for o in opts]
            keys = [o.split(' ', 1)[0][len('plugin_opt_'):] for o in opts]
            if 'policy' not in keys and 'policy_file' not in keys:
                opts = [BASE_POLICY] + opts
            ok, _, _, msg = probe(a, opts)
            if not ok:
                problems.append('mosquitto-dlq(7) line %d: the example is refused by the plugin\'s parser: %s'
                                % (line, msg))
            else:
                fed.update(keys)


def check_header_names(a, page, problems):
    """PROPERTIES and THE NACK PROTOCOL against include/mosquitto_dlq.h."""
    header = os.path.join(a.root, 'include/mosquitto_dlq.h')
    props = {v.strip('"'): n for n, v in header_defines(header, 'DLQ_PROP_').items()}
    documented = {spans(term)[0]: line for term, _, line in definitions(page.section_named('PROPERTIES'))
                  if spans(term)}
    for value in sorted(set(props) - set(documented)):
        problems.append('%s "%s": not documented in mosquitto-dlq(7) PROPERTIES' % (props[value], value))
    for value in sorted(set(documented) - set(props)):
        problems.append('property %s: documented in mosquitto-dlq(7) PROPERTIES (line %d) but not a DLQ_PROP_* '
                        'of include/mosquitto_dlq.h' % (value, documented[value]))
    section = page.section_named('THE NACK PROTOCOL')
    said = set(spans(section_text(section)))
    for name, value in sorted(header_defines(header, 'DLQ_').items()):
        if value.startswith('"$CONTROL/') and value.strip('"') not in said:
            problems.append('%s %s: not in mosquitto-dlq(7) THE NACK PROTOCOL' % (name, value))
    commands = {v.strip('"'): n for n, v in header_defines(header, 'DLQ_COMMAND_').items()}
    terms = {spans(t)[0] for t, _, _ in definitions(section) if spans(t)}
    for value in sorted(set(commands) ^ terms):
        problems.append('command %s: %s' % (value, 'not documented in mosquitto-dlq(7) THE NACK PROTOCOL'
                                            if value in commands else 'documented but not a DLQ_COMMAND_*'))
    return set(props) | set(commands)


def help_text(a):
    """dlqctl --help, which must succeed."""
    rc, out, err = run([a.dlqctl, '--help'])
    if rc != 0:
        raise SystemExit('dlqctl --help exits %d: %s' % (rc, err))
    return out


def help_parts(text):
    """(commands, {option: placeholder or None}, exit codes) of the usage text."""
    commands, options, part = [], {}, None
    for line in text.splitlines():
        if re.match(r'^[A-Z][\w ]*:$', line):
            part = line
            continue
        if part == 'Commands:':
            m = re.match(r'^  (\S+)', line)
            if m:
                commands.append(m.group(1))
        elif part and part.endswith('ptions:'):
            m = re.match(r'^  (--?[\w-]+(?: [A-Z]+)?(?:, --?[\w-]+(?: [A-Z]+)?)*)', line)
            if m:
                for opt, value in re.findall(r'(--?[\w-]+)(?: ([A-Z]+))?', m.group(1)):
                    options[opt] = value or None
    m = re.search(r'^Exit status: (.*)', text, re.M | re.S)
    codes = re.findall(r'(?:^|; |\n)(\d+) ', m.group(1)) if m else []
    return commands, options, codes


def dlqctl_takes(a, command, option, options, topic):
    """Whether dlqctl takes option with command: its parser says so."""
    def arg(o):
        return [o, SAMPLE_VALUES.get(options[o], '1')] if options.get(o) else [o]

    # A command that needs one of its options (purge: --filter or --all).
    needed = ['--all'] if command == 'purge' and option not in ('--all', '--filter') else []
    argv = [a.dlqctl] + NO_BROKER + arg(option) + needed + [command] + ([topic] if topic else [])
    rc, _, err = run(argv)
    m = re.search(r'needs (-\w)', err)
    if rc == 2 and m:
        # An option that needs another (-c needs -i): give it the other.
        argv[1:1] = arg(m.group(1))
        rc, _, err = run(argv)
    if rc == 1 and 'cannot connect' in err:
        return True
    if rc == 2 and 'does not apply' in err:
        return False
    raise SystemExit('%s exits %d: %s(the check must learn this answer)' % (' '.join(argv[1:]), rc, err))


def check_dlqctl(a, page, problems):
    """dlqctl(1) against the built dlqctl."""
    commands, options, codes = help_parts(help_text(a))
    if not commands or not options or not codes:
        raise SystemExit('dlqctl --help: no commands, options or exit status found: the check must learn its shape')
    documented = {}
    for term, text, line in definitions(page.section_named('COMMANDS')):
        if spans(term):
            documented[spans(term)[0]] = (term, text, line)
    doc_options = {}
    for term, _, line in definitions(page.section_named('OPTIONS')):
        for s in spans(term):
            if s.startswith('-'):
                doc_options[s] = line
    for c in sorted(set(commands) ^ set(documented)):
        problems.append('dlqctl command %s: %s' % (c, 'in dlqctl --help but not in dlqctl(1) COMMANDS'
                                                   if c in commands else 'in dlqctl(1) COMMANDS but not in dlqctl --help'))
    known = set(options) | {'--help'}  # --help: the check ran it
    for o in sorted(known ^ set(doc_options)):
        problems.append('dlqctl option %s: %s' % (o, 'taken by dlqctl but not in dlqctl(1) OPTIONS' if o in known
                                                  else 'in dlqctl(1) OPTIONS but not in dlqctl --help'))
    for section in page.sections:
        named = {w for s in spans(section_text(section)) for w in s.split() if re.match(r'--?[a-zA-Z]', w)}
        for o in sorted(named - known - set(doc_options)):
            problems.append('dlqctl option %s: named in dlqctl(1) %s but not taken by dlqctl' % (o, section.heading))
    check_command_options(a, commands, options, documented, problems)
    check_exit_status(a, page, codes, problems)
    check_dlqctl_examples(a, page, problems)
    with open(os.path.join(a.root, 'tools/dlqctl.h'), encoding='utf-8') as f:
        own = re.findall(r'^#define DLQCTL_PROP_\w+ "([^"]+)"', f.read(), re.M)
    said = {s for sec in page.sections for s in spans(section_text(sec))}
    for p in own:
        if p not in said:
            problems.append('user property %s (tools/dlqctl.h): not in dlqctl(1)' % p)
    return set(commands) | known | set(own)


def check_command_options(a, commands, options, documented, problems):
    """The "Options:" sentence of each command against what dlqctl takes with it."""
    taken = {}
    for c in commands:
        term = documented.get(c, (c, '', 0))[0]
        topic = 'man-check/topic' if re.search(r'\*TOPIC\*', term) else None
        if re.search(r'\*ID\*', term):
            topic = 'AAAAAAAAAAAAAAAA'  # a dead-letter id
        taken[c] = {o for o in options if dlqctl_takes(a, c, o, options, topic)}
    common = set.intersection(*taken.values())
    for c in sorted(set(commands) & set(documented)):
        _, text, line = documented[c]
        m = re.search(r'Options:\s+(.*?)\.(?:\s|$)', text, re.S)
        said = set(spans(m.group(1))) if m else set()
        own = taken[c] - common
        if said != own:
            problems.append('dlqctl %s: dlqctl(1) COMMANDS (line %d) says it takes %s; dlqctl takes %s (beyond '
                            'what every command takes)' % (c, line, ', '.join(sorted(said)) or 'nothing',
                                                           ', '.join(sorted(own)) or 'nothing'))


def check_exit_status(a, page, codes, problems):
    """EXIT STATUS against the usage text and what the check saw dlqctl exit with."""
    documented = [spans(t)[0] for t, _, _ in definitions(page.section_named('EXIT STATUS')) if spans(t)]
    if sorted(documented) != sorted(codes):
        problems.append('dlqctl(1) EXIT STATUS names %s; dlqctl --help says %s' % (', '.join(documented),
                                                                                  ', '.join(codes)))
    # What the check saw: --help 0, a failed connection 1, a usage error 2.
    seen = {'0': [a.dlqctl, '--help'], '1': [a.dlqctl] + NO_BROKER + ['status'],
            '2': [a.dlqctl, '--man-check-no-such-option']}
    for code, argv in seen.items():
        rc = run(argv)[0]
        if str(rc) != code or code not in documented:
            problems.append('%s exits %d; dlqctl(1) EXIT STATUS names %s' % (' '.join(argv[1:]), rc,
                                                                            ', '.join(documented)))


def check_dlqctl_examples(a, page, problems):
    """Every dlqctl line of EXAMPLES gets past the parser (and fails to connect)."""
    section = page.section_named('EXAMPLES')
    for b in section.blocks if section else []:
        if b.kind != 'code':
            continue
        for k, line in enumerate(b.lines):
            if not line.startswith('dlqctl '):
                continue
            argv = shlex.split(line)
            rc, _, err = run([a.dlqctl] + NO_BROKER + argv[1:])
            if rc != 1 or 'cannot connect' not in err:
                problems.append('dlqctl(1) line %d: the example %r is refused by dlqctl (%d): %s'
                                % (b.line + k + 1, line, rc, err.strip()))


def check_rendered(a, path, names, problems):
    """The built page renders without warnings, lexgrog reads it, and it holds names."""
    rc, _, err = run([a.man, '--warnings', '-E', 'UTF-8', '-l', '-Tutf8', '-Z', path])
    if rc != 0 or err.strip():
        problems.append('%s: man --warnings (%d): %s' % (path, rc, err.strip()))
    rc, out, err = run([a.lexgrog, path])
    if rc != 0 or ' - ' not in out:
        problems.append('%s: lexgrog (%d) cannot read its NAME: %s' % (path, rc, (out + err).strip()))
    rc, text, err = run([a.man, '-E', 'UTF-8', '-l', '-Tutf8', path])
    # Overstrikes (bold, underline) and SGR sequences out; hyphens and minus signs as typed.
    text = re.sub(r'\x1b\[[0-9;]*m', '', re.sub(r'.\x08', '', text))
    text = text.replace('\u2010', '-').replace('\u2212', '-')
    for name in sorted(names):
        if name not in text:
            problems.append('%s: %s is not in the rendered page' % (path, name))


def check(a, sources):
    """(every problem of the pages as messages, {page: the names checked in it}).
    sources: {name: md text}."""
    problems = []
    pages = {}
    for name, text in sources.items():
        try:
            pages[name] = md2man.parse(text)
        except md2man.SourceError as e:
            problems.append('man/%s.md: %s' % (name, e))
    if problems:
        return problems, {}
    seven, one = pages['mosquitto-dlq.7'], pages['dlqctl.1']
    for page, name, required in ((seven, 'mosquitto-dlq(7)', ('OPTIONS', 'POLICIES', 'PROPERTIES',
                                                              'THE NACK PROTOCOL')),
                                 (one, 'dlqctl(1)', ('COMMANDS', 'OPTIONS', 'EXIT STATUS', 'EXAMPLES'))):
        for heading in ('NAME', 'SYNOPSIS', 'DESCRIPTION') + required + ('SEE ALSO',):
            if page.section_named(heading) is None:
                problems.append('%s: no section %s' % (name, heading))
    if problems:
        return problems, {}
    fed = set()
    policy_defaults = check_policy_keys(a, seven, problems)
    documented = check_options(a, seven, policy_defaults, problems, fed)
    check_examples(a, seven, problems, fed)
    for key in sorted(documented - fed):
        problems.append('plugin_opt_%s: no documented value (default or example) of it is fed to the parser' % key)
    names7 = {'plugin_opt_' + k for k in documented} | set(policy_defaults) | check_header_names(a, seven, problems)
    names1 = check_dlqctl(a, one, problems)
    return problems, {'mosquitto-dlq.7': names7, 'dlqctl.1': names1}


def read_sources(root):
    """{page: its markdown source}."""
    out = {}
    for name in ('mosquitto-dlq.7', 'dlqctl.1'):
        with open(os.path.join(root, 'man', name + '.md'), encoding='utf-8') as f:
            out[name] = f.read()
    return out


def rendered_problems(a, names):
    """check_rendered on each built page, with the names checked in its source."""
    problems = []
    for path in a.page:
        check_rendered(a, path, names.get(os.path.basename(path), set()), problems)
    return problems


# Drift planted by --self-test: (what, page, text to replace, replacement,
# what the report must say).
PLANTS = [
    ('an option left out', 'mosquitto-dlq.7', '`plugin_opt_nack_window` *DURATION*\n: How long a delivered message'
     ' or retry copy stays NACKable, from `100ms`\n  to `7d`. Default: `300s`.\n\n', '',
     'plugin_opt_nack_window: accepted by the code'),
    ('an option renamed', 'mosquitto-dlq.7', '`plugin_opt_sys_interval` *DURATION*',
     '`plugin_opt_sys_period` *DURATION*', 'plugin_opt_sys_period: documented in mosquitto-dlq(7) OPTIONS'),
    ('an unknown option named in the text', 'mosquitto-dlq.7', 'Every `plugin_opt_sys_interval` the plugin',
     'Every `plugin_opt_sys_period` the plugin', 'plugin_opt_sys_period: named in mosquitto-dlq(7) DESCRIPTION'),
    ('a default changed', 'mosquitto-dlq.7', 'Default: `64MiB`', 'Default: `32MiB`',
     'plugin_opt_max_pending_bytes: the documented default `32MiB` is not'),
    ('a mode default changed', 'mosquitto-dlq.7', 'given as `on` or `always`.\n  Default: `on`.',
     'given as `on` or `always`.\n  Default: `off`.', 'plugin_opt_delivery_count: the documented default `off`'),
    ('a policy key left out', 'mosquitto-dlq.7', '`retry_jitter=`*FRACTION*', '*FRACTION*',
     'policy key retry_jitter: accepted by the code'),
    ('a policy default changed', 'mosquitto-dlq.7', 'Default: `1h`', 'Default: `2h`',
     'policy key retry_max_delay: the documented default `2h`'),
    ('a property left out', 'mosquitto-dlq.7', '`first-nack-time`\n:', 'first-nack-time\n:',
     'DLQ_PROP_FIRST_NACK_TIME "first-nack-time": not documented'),
    ('a refused example', 'mosquitto-dlq.7', 'max_attempts=5 dead_letter=dead/readings',
     'max_attempts=0 dead_letter=dead/readings', 'the example is refused'),
    ('a dlqctl option left out', 'dlqctl.1',
     '`--rate` *N*\n: For `redrive` *TOPIC*: at most *N* redriven messages a second. For\n'
     '  `redrive --all`: the task\'s rate, a whole number from 1 to 10000\n  (default 100).\n\n', '',
     'dlqctl option --rate: taken by dlqctl'),
    ('a command\'s options wrong', 'dlqctl.1', 'Options:\n  `--json`, `--follow`,', 'Options:\n  `--json`,',
     'dlqctl inspect: dlqctl(1) COMMANDS'),
    ('an unknown dlqctl option named in the text', 'dlqctl.1', 'stops when nothing came for `--idle` seconds',
     'stops when nothing came for `--quiet` seconds', 'dlqctl option --quiet: named in dlqctl(1) COMMANDS'),
    ('a wrong dlqctl example', 'dlqctl.1', 'dlqctl status\n', 'dlqctl status --follow\n',
     'is refused by dlqctl'),
    ('an exit status left out', 'dlqctl.1', '`2`\n: A wrong command line.\n', '',
     'dlqctl(1) EXIT STATUS names 0, 1'),
]


def self_test(a, sources):
    """Problems of the check itself: planted drift it does not report."""
    failures = []
    for what, name, old, new, expect in PLANTS:
        if old not in sources[name]:
            failures.append('self-test: cannot plant %s: %r is not in man/%s.md' % (what, old, name))
            continue
        planted = dict(sources, **{name: sources[name].replace(old, new, 1)})
        reported = check(a, planted)[0]
        if not any(expect in p for p in reported):
            failures.append('self-test: %s is not reported (expected "%s"); reported: %s'
                            % (what, expect, reported or 'nothing'))
    if a.man and a.lexgrog:
        with tempfile.TemporaryDirectory() as tmp:
            with open(a.page[0], encoding='utf-8') as f:
                roff = f.read()
            for what, old, new, expect in (('an undefined macro', '.SH "NAME"', '.SH "NAME"\n.XX', 'man --warnings'),
                                           ('a NAME lexgrog cannot read', ' \\- ', ' ', 'lexgrog')):
                # A folder per plant: the runs are cached by their arguments.
                os.mkdir(os.path.join(tmp, what))
                path = os.path.join(tmp, what, os.path.basename(a.page[0]))
                with open(path, 'w', encoding='utf-8') as f:
                    f.write(roff.replace(old, new, 1))
                problems = []
                check_rendered(a, path, set(), problems)
                if not any(expect in p for p in problems):
                    failures.append('self-test: %s is not reported; reported: %s' % (what, problems or 'nothing'))
    print('self-test: %d kinds of drift planted, %d not reported' % (len(PLANTS) + 2, len(failures)))
    return failures


def main():
    global md2man
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--root', required=True)
    ap.add_argument('--probe', required=True)
    ap.add_argument('--dlqctl', required=True)
    ap.add_argument('--page', action='append', required=True, help='a built page (mosquitto-dlq.7, dlqctl.1)')
    ap.add_argument('--man', default='')
    ap.add_argument('--lexgrog', default='')
    ap.add_argument('--self-test', action='store_true')
    a = ap.parse_args()
    sys.path.insert(0, os.path.join(a.root, 'man'))
    import md2man as module
    md2man = module
    sources = read_sources(a.root)
    problems, names = check(a, sources)
    if not problems and a.man and a.lexgrog:
        problems += rendered_problems(a, names)
    if a.self_test:
        problems += self_test(a, sources)
    for p in problems:
        print(p, file=sys.stderr)
    if problems:
        print('%d problems: the man pages (man/*.md) and the code disagree' % len(problems), file=sys.stderr)
        return 1
    if not (a.man and a.lexgrog):
        print('the pages keep to the code; not rendered: man or lexgrog is missing (packages man-db, groff-base)')
        return 77
    print('the man pages keep to the code and render without warnings')
    return 0


if __name__ == '__main__':
    sys.exit(main())
