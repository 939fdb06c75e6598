// A back end built on the unmodified Azure IoT service SDK for Node
// (azure-iothub), driven by azure_test.go: node service.js <command> ...
// with SERVICE_CONNECTION_STRING set. Each command writes one JSON object
// to stdout: {"ok":true,...} or {"ok":false,"error":<class>,"status":<HTTP status>,"message":...}.
'use strict';
const { Registry, Client } = require('azure-iothub');
const { Message } = require('azure-iot-common');

const out = (o) => process.stdout.write(JSON.stringify(o) + '\n');
const cs = process.env.SERVICE_CONNECTION_STRING;

function failure(err) {
  return { ok: false, error: err.constructor && err.constructor.name, status: err.response && err.response.statusCode,
    message: String(err.message), cause: err.amqpError && err.amqpError.constructor && err.amqpError.constructor.name };
}

const commands = {
  // create <deviceId>: a SAS device with generated keys.
  async create(id) {
    const { responseBody } = await Registry.fromConnectionString(cs).create({ deviceId: id });
    return { device: responseBody };
  },
  // add-devices <deviceId>...: a bulk create (Registry.addDevices).
  async 'add-devices'(...ids) {
    const { responseBody } = await Registry.fromConnectionString(cs).addDevices(ids.map((deviceId) => ({ deviceId })));
    return { result: responseBody };
  },
  // remove-devices <deviceId>...: a forced bulk delete (Registry.removeDevices).
  async 'remove-devices'(...ids) {
    const { responseBody } = await Registry.fromConnectionString(cs).removeDevices(ids.map((deviceId) => ({ deviceId })), true);
    return { result: responseBody };
  },
  // disable <deviceId>: status disabled (Registry.update).
  async disable(id) {
    const { responseBody } = await Registry.fromConnectionString(cs).update({ deviceId: id, status: 'disabled' });
    return { device: responseBody };
  },
  // enable <deviceId>: status enabled again (Registry.update).
  async enable(id) {
    const { responseBody } = await Registry.fromConnectionString(cs).update({ deviceId: id, status: 'enabled' });
    return { device: responseBody };
  },
  // stats: the registry's device counts (Registry.getRegistryStatistics).
  async stats() {
    const { responseBody } = await Registry.fromConnectionString(cs).getRegistryStatistics();
    return { stats: responseBody };
  },
  // get <deviceId>: the device identity.
  async get(id) {
    const { responseBody } = await Registry.fromConnectionString(cs).get(id);
    return { device: responseBody };
  },
  // create-x509 <deviceId> <thumbprint>: a self-signed certificate device.
  async 'create-x509'(id, thumb) {
    const { responseBody } = await Registry.fromConnectionString(cs).create({ deviceId: id,
      authentication: { x509Thumbprint: { primaryThumbprint: thumb } } });
    return { device: responseBody };
  },
  // create-module <deviceId> <moduleId>: a SAS module with generated keys.
  async 'create-module'(id, mid) {
    const { responseBody } = await Registry.fromConnectionString(cs).addModule({ deviceId: id, moduleId: mid });
    return { module: responseBody };
  },
  // module-update-desired <deviceId> <moduleId> <patch JSON>: with the module twin's etag.
  async 'module-update-desired'(id, mid, patch) {
    const registry = Registry.fromConnectionString(cs);
    const { responseBody: twin } = await registry.getModuleTwin(id, mid);
    const { responseBody: updated } = await registry.updateModuleTwin(id, mid, { properties: { desired: JSON.parse(patch) } }, twin.etag);
    return { twin: updated };
  },
  // get-module-twin <deviceId> <moduleId>
  async 'get-module-twin'(id, mid) {
    const { responseBody } = await Registry.fromConnectionString(cs).getModuleTwin(id, mid);
    return { twin: responseBody };
  },
  // get-twin <deviceId>
  async 'get-twin'(id) {
    const { responseBody } = await Registry.fromConnectionString(cs).getTwin(id);
    return { twin: responseBody };
  },
  // update-desired <deviceId> <patch JSON>: with the twin's current etag.
  async 'update-desired'(id, patch) {
    const registry = Registry.fromConnectionString(cs);
    const { responseBody: twin } = await registry.getTwin(id);
    const { result } = await twin.update({ properties: { desired: JSON.parse(patch) } });
    return { etag: result.etag, desired: result.properties.desired };
  },
  // stale-update <deviceId> <patch1 JSON> <patch2 JSON>: two back ends read
  // the twin, the first updates it, the second's etag is then stale.
  async 'stale-update'(id, p1, p2) {
    const registry = Registry.fromConnectionString(cs);
    const { responseBody: a } = await registry.getTwin(id);
    const { responseBody: b } = await registry.getTwin(id);
    await a.update({ properties: { desired: JSON.parse(p1) } });
    try {
      await b.update({ properties: { desired: JSON.parse(p2) } });
      return { secondUpdated: true };
    } catch (err) {
      return { secondUpdated: false, second: failure(err) };
    }
  },
  // query <SQL> <page size>: every page, as twins.
  async query(sql, pageSize) {
    const query = Registry.fromConnectionString(cs).createQuery(sql, Number(pageSize));
    const ids = [];
    let pages = 0;
    while (query.hasMoreResults) {
      const { result } = await query.nextAsTwin();
      pages++;
      for (const twin of result) ids.push(twin.deviceId);
    }
    return { pages, ids };
  },
  // send <deviceId> <count> <messageId prefix> [<properties JSON>]: count
  // cloud-to-device messages over one AMQP connection (Client.send), bodies
  // "<prefix>-<i>", message ids the same; then, on the same connection,
  // one to the device "no-such-device" whose failure is reported as
  // unknownDevice.
  async send(id, count, prefix, props) {
    const client = Client.fromConnectionString(cs);
    await client.open();
    try {
      for (let i = 0; i < Number(count); i++) {
        const msg = new Message(prefix + '-' + i);
        msg.messageId = prefix + '-' + i;
        msg.correlationId = 'corr-' + i;
        msg.contentType = 'text/plain';
        msg.expiryTimeUtc = Date.now() + 60000;
        for (const [k, v] of Object.entries(JSON.parse(props || '{}'))) msg.properties.add(k, v);
        await client.send(id, msg);
      }
      let unknownDevice = null;
      try {
        await client.send('no-such-device', new Message('x'));
      } catch (err) {
        unknownDevice = failure(err);
      }
      return { sent: Number(count), unknownDevice };
    } finally {
      await client.close();
    }
  },
  // feedback <deviceId> <messageId>: a cloud-to-device message with ack
  // "full", then the feedback record for it from the feedback receiver
  // (Client.getFeedbackReceiver), completed.
  async feedback(id, mid) {
    const client = Client.fromConnectionString(cs);
    await client.open();
    try {
      const { result: receiver } = await client.getFeedbackReceiver(); // the promise form's result
      const got = new Promise((resolve, reject) => {
        receiver.on('errorReceived', reject);
        receiver.on('message', (msg) => {
          const records = JSON.parse(msg.getData().toString());
          receiver.complete(msg, () => {});
          const rec = records.find((r) => r.originalMessageId === mid);
          if (rec) resolve({ record: rec, contentType: msg.contentType, batch: records.length });
        });
      });
      const msg = new Message('with feedback');
      msg.messageId = mid;
      msg.ack = 'full';
      await client.send(id, msg);
      return await got;
    } finally {
      await client.close();
    }
  },
  // invoke-module <deviceId> <moduleId> <method> <payload JSON> <response timeout s>: a module's method.
  async 'invoke-module'(id, mid, method, payload, timeout) {
    const client = Client.fromConnectionString(cs);
    try {
      const { result } = await client.invokeDeviceMethod(id, mid, { methodName: method, payload: JSON.parse(payload),
        responseTimeoutInSeconds: Number(timeout) });
      return { result };
    } catch (err) {
      return { ...failure(err), body: err.responseBody };
    }
  },
  // invoke <deviceId> <method> <payload JSON> <response timeout s> [<connect timeout s>]:
  // the result, or the failure with the error body; ms is how long the call took.
  async invoke(id, method, payload, timeout, connectTimeout) {
    const client = Client.fromConnectionString(cs);
    const params = { methodName: method, payload: JSON.parse(payload), responseTimeoutInSeconds: Number(timeout) };
    if (connectTimeout !== undefined) params.connectTimeoutInSeconds = Number(connectTimeout);
    const start = Date.now();
    process.stderr.write('calling\n');
    try {
      const { result } = await client.invokeDeviceMethod(id, params);
      return { result, ms: Date.now() - start };
    } catch (err) {
      return { ...failure(err), body: err.responseBody, ms: Date.now() - start };
    }
  },
};

async function main() {
  const [cmd, ...args] = process.argv.slice(2);
  if (!commands[cmd]) throw new Error('unknown command ' + cmd);
  try {
    out({ ok: true, ...(await commands[cmd](...args)) });
  } catch (err) {
    out(failure(err));
  }
}

main().catch((err) => { out(failure(err)); process.exit(1); });
