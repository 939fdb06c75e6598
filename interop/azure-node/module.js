// A module built on the unmodified Azure IoT device SDK for Node
// (ModuleClient of azure-iot-device + azure-iot-device-mqtt), driven by
// azure_test.go: with MODULE_CONNECTION_STRING (and MODEL_ID, an IoT Plug
// and Play model id announced when it connects) it reads its module twin,
// reports properties, prints desired changes and serves the direct method
// "ping", one JSON object per line on stdout, until stdin closes.
'use strict';
const { ModuleClient } = require('azure-iot-device');
const { Mqtt } = require('azure-iot-device-mqtt');

const out = (o) => process.stdout.write(JSON.stringify(o) + '\n');
const fail = (what, err) => out({ event: 'error', what, message: String(err && err.message || err) });

async function main() {
  const client = ModuleClient.fromConnectionString(process.env.MODULE_CONNECTION_STRING, Mqtt);
  client.on('error', (err) => fail('client', err));
  client.on('disconnect', () => out({ event: 'disconnect' }));
  if (process.env.MODEL_ID) {
    await client.setOptions({ modelId: process.env.MODEL_ID }); // IoT Plug and Play
  }
  client.onMethod('ping', (req, res) => {
    out({ event: 'method', name: req.methodName, payload: req.payload });
    res.send(201, { pong: req.payload }, (err) => { if (err) fail('method response', err); });
  });
  await client.open();
  out({ event: 'connected' });
  const twin = await client.getTwin();
  out({ event: 'twin', desired: twin.properties.desired, reported: twin.properties.reported });
  twin.on('properties.desired', (delta) => out({ event: 'desired', delta }));
  await new Promise((resolve, reject) => twin.properties.reported.update({ role: 'sensor', interval: 30 },
    (err) => (err ? reject(err) : resolve())));
  out({ event: 'reported' });
  out({ event: 'ready' });
  process.stdin.resume();
  process.stdin.on('end', async () => {
    try { await client.close(); } catch (err) { fail('close', err); }
    process.exit(0);
  });
}

main().catch((err) => { fail('main', err); process.exit(1); });
