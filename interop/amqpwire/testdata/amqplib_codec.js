// Reads lines "ID HEX" from stdin: ID a method id (class << 16 | method)
// and HEX its arguments, or ID "P" and HEX basic properties (flags and
// list). Decodes each with amqplib's own codec, encodes it again with
// it, and prints the arguments or properties it wrote, one hex line
// each. Run in interop/amqp-node, where npm ci installed amqplib.
// amqplib's codec is internal (not in its package exports): load it by
// path from the working directory's node_modules.
const path = require('path');
const defs = require(path.join(process.cwd(), 'node_modules', 'amqplib', 'lib', 'defs.js'));

let input = '';
process.stdin.on('data', (d) => (input += d));
process.stdin.on('end', () => {
  const out = [];
  for (const line of input.split('\n')) {
    if (line === '') continue;
    const [id, hex = ''] = line.split(' ');
    const buf = Buffer.from(hex, 'hex');
    if (id === 'P') {
      const frame = defs.encodeProperties(60, 1, 0, defs.decode(60, buf));
      // type, channel, size (7), class, weight, body size (12) ... frame-end
      out.push(frame.subarray(19, frame.length - 1).toString('hex'));
      continue;
    }
    const n = Number(id);
    let info;
    try {
      info = defs.info(n);
    } catch (e) {
      info = undefined;
    }
    if (!info) {
      out.push('skip');
      continue;
    }
    const frame = defs.encodeMethod(n, 1, defs.decode(n, buf));
    // type, channel, size (7), class and method ids (4) ... frame-end
    out.push(frame.subarray(11, frame.length - 1).toString('hex'));
  }
  process.stdout.write(out.join('\n') + '\n');
});
