// The common AMQP 0-9-1 flows with the unmodified amqplib 2.3.1 (promise
// API). Usage: node flows.js URL PREFIX FLOW, FLOW one of basic, confirms,
// topic, rpc, channel_error. Every name a flow declares starts with
// PREFIX. It prints one JSON object with what it saw;
// interop/amqp091/clients_test.go checks it. An unexpected error exits 1.
'use strict';
const amqp = require('amqplib');

function waitFor(what, cond, ms = 10000) {
  const until = Date.now() + ms;
  return new Promise((resolve, reject) => {
    const look = () => {
      if (cond()) return resolve();
      if (Date.now() > until) return reject(new Error('timed out waiting for ' + what));
      setTimeout(look, 10);
    };
    look();
  });
}

async function drain(ch, q) {
  const out = [];
  for (;;) {
    const m = await ch.get(q, { noAck: true });
    if (m === false) return out;
    out.push(m.content.toString());
  }
}

const flows = {
  async basic(conn, prefix) {
    const ch = await conn.createConfirmChannel();
    const q = prefix + '.basic';
    await ch.assertQueue(q);
    for (let i = 0; i < 10; i++) {
      ch.sendToQueue(q, Buffer.from('msg ' + i), { persistent: true, contentType: 'text/plain' });
    }
    await ch.waitForConfirms();
    await ch.prefetch(3);
    const bodies = [], redelivered = [];
    await ch.consume(q, (m) => {
      if (m === null) return; // cancelled by the server: the queue's delete below
      bodies.push(m.content.toString());
      redelivered.push(m.fields.redelivered);
      ch.ack(m);
    });
    await waitFor('10 messages', () => bodies.length === 10);
    const left = (await ch.checkQueue(q)).messageCount;
    await ch.deleteQueue(q);
    return { bodies, redelivered, left };
  },

  async confirms(conn, prefix) {
    const ch = await conn.createConfirmChannel();
    const q = prefix + '.confirms';
    await ch.assertQueue(q);
    let acked = 0;
    const pending = [];
    for (let i = 0; i < 100; i++) {
      pending.push(new Promise((resolve, reject) => {
        ch.sendToQueue(q, Buffer.from(String(i)), {}, (err) => (err ? reject(err) : resolve(++acked)));
      }));
    }
    await Promise.all(pending);
    let returned = null;
    ch.on('return', (m) => { returned = { code: m.fields.replyCode, text: m.fields.replyText, body: m.content.toString() }; });
    ch.publish('', prefix + '.nowhere', Buffer.from('lost'), { mandatory: true });
    await ch.waitForConfirms();
    await waitFor('basic.return', () => returned !== null);
    const count = (await ch.checkQueue(q)).messageCount;
    await ch.deleteQueue(q);
    return { acked, returned, count };
  },

  async topic(conn, prefix) {
    const ch = await conn.createConfirmChannel();
    const ex = prefix + '.topic';
    await ch.assertExchange(ex, 'topic', { durable: false });
    const binds = { orange: '*.orange.*', lazy: 'lazy.#' };
    for (const [q, key] of Object.entries(binds)) {
      await ch.assertQueue(prefix + '.' + q);
      await ch.bindQueue(prefix + '.' + q, ex, key);
    }
    for (const key of ['quick.orange.rabbit', 'lazy.orange.elephant', 'lazy.brown.fox', 'quick.brown.fox', 'lazy', 'orange']) {
      ch.publish(ex, key, Buffer.from(key));
    }
    await ch.waitForConfirms();
    const got = {};
    for (const q of Object.keys(binds)) {
      got[q] = await drain(ch, prefix + '.' + q);
      await ch.deleteQueue(prefix + '.' + q);
    }
    await ch.deleteExchange(ex);
    return got;
  },

  async rpc(conn, prefix) {
    const server = await conn.createChannel();
    const rq = prefix + '.rpc';
    await server.assertQueue(rq);
    await server.consume(rq, (m) => {
      if (m === null) return; // cancelled by the server: the queue's delete below
      server.sendToQueue(m.properties.replyTo, Buffer.from(m.content.toString().toUpperCase()),
        { correlationId: m.properties.correlationId });
      server.ack(m);
    });
    const client = await conn.createChannel();
    const { queue: reply } = await client.assertQueue('', { exclusive: true });
    let out = null;
    await client.consume(reply, (m) => {
      if (m === null) return;
      out = { body: m.content.toString(), correlation_id: m.properties.correlationId };
    }, { noAck: true });
    client.sendToQueue(rq, Buffer.from('ping'), { replyTo: reply, correlationId: 'c-42' });
    await waitFor('the reply', () => out !== null);
    await server.deleteQueue(rq);
    out.reply_queue = reply;
    return out;
  },

  async channel_error(conn, prefix) {
    const ch = await conn.createChannel();
    let closed = false;
    ch.on('error', () => {}); // the close below is expected
    ch.on('close', () => { closed = true; });
    let code = null;
    try {
      await ch.checkQueue(prefix + '.missing');
    } catch (e) {
      code = e.code;
    }
    await waitFor('the channel close', () => closed);
    const ok = await conn.createConfirmChannel();
    const q = prefix + '.after';
    await ok.assertQueue(q);
    ok.sendToQueue(q, Buffer.from('still here'));
    await ok.waitForConfirms();
    const m = await ok.get(q, { noAck: true });
    await ok.deleteQueue(q);
    return { code, channel_open: !closed, after: m ? m.content.toString() : null };
  },
};

async function main() {
  const [url, prefix, flow] = process.argv.slice(2);
  if (!flows[flow]) throw new Error('unknown flow ' + flow);
  const conn = await amqp.connect(url);
  try {
    console.log(JSON.stringify(await flows[flow](conn, prefix)));
  } finally {
    await conn.close();
  }
}

main().catch((e) => {
  console.error(e && e.stack ? e.stack : e);
  process.exit(1);
});
