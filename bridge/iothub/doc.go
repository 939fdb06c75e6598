// Package iothub is the IoT Hub surface of a bridge node, so that devices
// and back ends written for Azure IoT Hub (its device and service SDKs)
// work against SmartGo unchanged:
//
//   - Devices connect over MQTT 3.1.1 (the node's TLS listener on port
//     8883 for the SDKs) with IoT Hub's user name and client id, a SAS
//     token or a client certificate (auth.go, sas.go), and use the twin,
//     direct-method, telemetry and cloud-to-device topics (topics.go,
//     device.go, methods.go, messages.go). They may use only their own
//     topics; the $iothub and devices trees are reserved for them.
//   - Their connections are recorded in the identity registry
//     (connectionState, lastActivityTime) and their twins watched for
//     desired changes while they are connected to the node (lifecycle.go).
//   - The back end uses an HTTPS API in IoT Hub's REST shape (rest.go),
//     authorised by SAS tokens of shared access policies: identities,
//     twins, queries, direct methods, and cloud-to-device messages
//     (SmartGo's own endpoint); the service SDKs send cloud-to-device
//     messages over AMQP 1.0 (amqp.go, on the codec of package amqp1).
//
// Identities and twins live in the twin shards of the brokers (package
// twin, reached with client/twin); direct methods find the node holding
// the device through the RPC topic (methods.go); cloud-to-device messages
// travel through the bridge's egress topic and persistent sessions.
// docs/iothub.md describes the surface for operators.
package iothub
