// A device built on the unmodified Azure IoT device SDK for Node
// (azure-iot-device + azure-iot-device-mqtt), driven by azure_test.go.
//
// It connects with DEVICE_CONNECTION_STRING (and DEVICE_CERT / DEVICE_KEY
// files for an X.509 device, MODEL_ID for an IoT Plug and Play model id
// announced when it connects), reads its twin, reports properties, and
// serves the direct methods "reboot", "my method" and "dump" and
// cloud-to-device messages. What
// happens is written to stdout as one JSON object per line; it stops when
// stdin closes.
'use strict';
const fs = require('fs');
const { Client, Message } = require('azure-iot-device');
const { Mqtt } = require('azure-iot-device-mqtt');

const out = (o) => process.stdout.write(JSON.stringify(o) + '\n');
const fail = (what, err) => out({ event: 'error', what, message: String(err && err.message || err) });

async function main() {
  const client = Client.fromConnectionString(process.env.DEVICE_CONNECTION_STRING, Mqtt);
  if (process.env.DEVICE_CERT) {
    client.setOptions({ cert: fs.readFileSync(process.env.DEVICE_CERT, 'utf8'), key: fs.readFileSync(process.env.DEVICE_KEY, 'utf8') });
  }
  if (process.env.MODEL_ID) {
    await client.setOptions({ modelId: process.env.MODEL_ID }); // IoT Plug and Play
  }
  client.on('error', (err) => fail('client', err));
  client.on('disconnect', () => out({ event: 'disconnect' }));
  client.on('message', (msg) => {
    out({ event: 'c2d', data: msg.data.toString(), messageId: msg.messageId, properties: msg.properties.propertyList });
    client.complete(msg, (err) => { if (err) fail('complete', err); });
  });
  client.onDeviceMethod('reboot', (req, res) => {
    out({ event: 'method', name: req.methodName, payload: req.payload });
    res.send(200, { rebooted: true, echo: req.payload }, (err) => { if (err) fail('method response', err); });
  });
  // 'my method' cannot be called (IoT Hub refuses a name with a space);
  // 'dump' answers with a string of payload.size characters.
  client.onDeviceMethod('my method', (req, res) => {
    out({ event: 'method', name: req.methodName, payload: req.payload });
    res.send(200, {}, (err) => { if (err) fail('method response', err); });
  });
  client.onDeviceMethod('dump', (req, res) => {
    out({ event: 'method', name: req.methodName });
    res.send(200, 'd'.repeat(req.payload.size), (err) => { if (err) fail('method response', err); });
  });
  await client.open();
  out({ event: 'connected' });
  const twin = await client.getTwin();
  out({ event: 'twin', desired: twin.properties.desired, reported: twin.properties.reported });
  twin.on('properties.desired', (delta) => out({ event: 'desired', delta }));
  await new Promise((resolve, reject) => twin.properties.reported.update({ firmware: '1.2.3', battery: { level: 80 } },
    (err) => (err ? reject(err) : resolve())));
  out({ event: 'reported' });
  const msg = new Message(JSON.stringify({ temperature: 21.5 }));
  msg.messageId = 'telemetry-1';
  msg.properties.add('unit', 'celsius');
  await client.sendEvent(msg);
  out({ event: 'sent' });
  out({ event: 'ready' });
  process.stdin.resume();
  process.stdin.on('end', async () => {
    try { await client.close(); } catch (err) { fail('close', err); }
    process.exit(0);
  });
}

main().catch((err) => { fail('main', err); process.exit(1); });
