# Reads lines "ID HEX" from stdin: ID a method id (class << 16 | method)
# and HEX its arguments, or ID "P" and HEX basic properties (flags and
# list). Decodes each with pika's own codec, encodes it again with it,
# and prints the arguments or properties it wrote, one hex line each
# ("skip" for a method pika does not know).
import sys

from pika import spec

out = []
for line in sys.stdin.read().splitlines():
    if not line:
        continue
    parts = line.split(' ')
    ident, raw = parts[0], bytes.fromhex(parts[1] if len(parts) > 1 else '')
    if ident == 'P':
        p = spec.BasicProperties()
        p.decode(raw)
        out.append(b''.join(p.encode()).hex())
        continue
    cls = spec.methods.get(int(ident))
    if cls is None:
        out.append('skip')
        continue
    m = cls()
    m.decode(raw)
    out.append(b''.join(m.encode()).hex())
sys.stdout.write('\n'.join(out) + '\n')
