package protocol

// SmartGo's administration extensions (not RocketMQ's; RocketMQ codes stay
// far below these): MQTT bridge nodes registering with the registries and
// answering admin calls relayed by them, and browsing a broker's state
// store keys. Every body is JSON (EncodeJSON/DecodeJSON); fields are listed
// in the types below, which pin the key names.
//
// Bridge nodes. A bridge sends RegisterBridge to every registry every
// heartbeat interval (10 s) on one remoting connection per registry; the
// registry keeps the node until its connection closes, an UnregisterBridge
// arrives, or it is silent longer than the broker expiry. An admin client
// lists nodes with GetBridgeList and reaches a node with MQTTAdmin, sent to
// a registry and relayed by it, unchanged, over the node's own connection
// (the node needs no listener of its own); the node's answer comes back
// unchanged, or the registry answers QueryNotFound when it does not know
// the node and SystemError when the node did not answer in time.
//
//	9200 REGISTER_BRIDGE    bridge -> registry   body BridgeInfo; answer Success
//	9201 UNREGISTER_BRIDGE  bridge -> registry   body BridgeInfo (Node is enough)
//	9202 GET_BRIDGE_LIST    admin  -> registry   answer body BridgeList
//	9203 MQTT_ADMIN         admin  -> registry -> bridge
//	                                             body MQTTAdminRequest; answer body by Op:
//	                                             clients MQTTClientPage, sessions MQTTSessionPage,
//	                                             retained MQTTRetainedPage, disconnect MQTTDisconnectResult,
//	                                             prepare-c2d MQTTPrepareC2DResult,
//	                                             amqp-* (a node's AMQP 0-9-1 server): see adminamqp.go
//	9110 STATESTORE_SCAN    admin  -> broker     body StateStoreScanRequest; answer body StateStoreScanPage
const (
	RegisterBridge   RequestCode = 9200
	UnregisterBridge RequestCode = 9201
	GetBridgeList    RequestCode = 9202
	MQTTAdmin        RequestCode = 9203
	StateStoreScan   RequestCode = 9110
)

// BridgeInfo is a bridge node's heartbeat.
type BridgeInfo struct {
	Node            string   `json:"node"`            // the node id (unique per process)
	Addrs           []string `json:"addrs"`           // MQTT listen addresses
	Version         string   `json:"version"`         // SmartGo version
	StartedAt       int64    `json:"startedAt"`       // Unix milliseconds
	Connections     int64    `json:"connections"`     // open MQTT connections
	Sessions        int64    `json:"sessions"`        // sessions held by the node
	Subscriptions   int64    `json:"subscriptions"`   // their subscriptions
	ClusterSessions int64    `json:"clusterSessions"` // persistent sessions of the cluster, as the node sees them
	Retained        int64    `json:"retained"`        // retained messages of the cluster, as the node sees them
	Received        int64    `json:"received"`        // PUBLISH packets received since start
	Sent            int64    `json:"sent"`            // PUBLISH packets sent since start
	// LastUpdate is set by the registry in GetBridgeList answers: when it
	// last heard from the node (Unix milliseconds).
	LastUpdate int64 `json:"lastUpdate,omitempty"`
}

// BridgeList is the answer to GetBridgeList, sorted by node.
type BridgeList struct {
	Bridges []BridgeInfo `json:"bridges"`
}

// MQTT administration operations (MQTTAdminRequest.Op).
const (
	MQTTOpClients    = "clients"
	MQTTOpSessions   = "sessions"
	MQTTOpRetained   = "retained"
	MQTTOpDisconnect = "disconnect"
	// MQTTOpPrepareC2D asks an IoT hub node to give the device ClientID a
	// session holding its cloud-to-device subscription if it has none.
	MQTTOpPrepareC2D = "prepare-c2d"
)

// MaxMQTTAdminLimit bounds a page of an MQTT admin listing.
const MaxMQTTAdminLimit = 10000

// MQTTAdminRequest is one MQTT administration call for a bridge node.
// Listings are sorted by client id (sessions, clients) or topic
// (retained) and paged: Prefix keeps the entries starting with it, After
// skips those up to and including it, Limit (1..MaxMQTTAdminLimit,
// default 1000) bounds the page.
type MQTTAdminRequest struct {
	Node     string `json:"node"`
	Op       string `json:"op"`
	ClientID string `json:"clientId,omitempty"` // disconnect
	Prefix   string `json:"prefix,omitempty"`
	After    string `json:"after,omitempty"`
	Limit    int    `json:"limit,omitempty"`
	// AMQP ops (adminamqp.go).
	VHost  string `json:"vhost,omitempty"`
	Name   string `json:"name,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// MQTTSubscription is one subscription of a session.
type MQTTSubscription struct {
	Filter string `json:"filter"`
	QoS    byte   `json:"qos"`
}

// MQTTClientInfo is one connected client.
type MQTTClientInfo struct {
	ClientID      string             `json:"clientId"`
	Node          string             `json:"node"`
	Username      string             `json:"username,omitempty"`
	RemoteAddr    string             `json:"remoteAddr"`
	Version       byte               `json:"protocolVersion"` // 3, 4 (3.1.1) or 5
	KeepAliveSecs int64              `json:"keepAlive"`
	Subscriptions []MQTTSubscription `json:"subscriptions"`
	Inflight      int                `json:"inflight"` // QoS 1/2 sent, not yet acknowledged
	Queued        int                `json:"queued"`   // QoS 1/2 waiting for quota
}

// MQTTClientPage is a page of connected clients.
type MQTTClientPage struct {
	Items []MQTTClientInfo `json:"items"`
	Total int              `json:"total"`          // entries matching Prefix
	Next  string           `json:"next,omitempty"` // After for the next page; "" at the end
}

// MQTTSessionInfo is one persistent session of the cluster, connected or
// not.
type MQTTSessionInfo struct {
	ClientID       string             `json:"clientId"`
	Node           string             `json:"node"` // the node that wrote its latest record
	Online         bool               `json:"online"`
	Username       string             `json:"username,omitempty"`
	Subscriptions  []MQTTSubscription `json:"subscriptions"`
	ExpirySecs     int64              `json:"expiry"`                   // session expiry interval
	DisconnectedAt int64              `json:"disconnectedAt,omitempty"` // Unix milliseconds, offline sessions
	Pending        int                `json:"pending"`                  // messages kept for it
}

// MQTTSessionPage is a page of sessions.
type MQTTSessionPage struct {
	Items []MQTTSessionInfo `json:"items"`
	Total int               `json:"total"`
	Next  string            `json:"next,omitempty"`
}

// MQTTRetainedInfo is one retained message. Payload holds at most the
// first 4 KiB; Size is the whole payload's.
type MQTTRetainedInfo struct {
	Topic       string `json:"topic"`
	QoS         byte   `json:"qos"`
	Size        int    `json:"size"`
	Payload     []byte `json:"payload"` // base64 in JSON
	ContentType string `json:"contentType,omitempty"`
	ExpiresAt   int64  `json:"expiresAt,omitempty"` // Unix milliseconds
}

// MQTTRetainedPage is a page of retained messages.
type MQTTRetainedPage struct {
	Items []MQTTRetainedInfo `json:"items"`
	Total int                `json:"total"`
	Next  string             `json:"next,omitempty"`
}

// MQTTDisconnectResult answers a disconnect: whether the client was
// connected to the node (and is now disconnected).
type MQTTDisconnectResult struct {
	Disconnected bool `json:"disconnected"`
}

// MQTTPrepareC2DResult answers prepare-c2d: whether the node is an IoT hub
// node that made sure of the session (false: it is not a hub).
type MQTTPrepareC2DResult struct {
	Prepared bool `json:"prepared"`
}

// MaxStateStoreScanLimit bounds a page of a state store scan.
const MaxStateStoreScanLimit = 1000

// StateStoreScanRequest lists a broker's state store keys starting with
// Prefix, in byte order after After, at most Limit
// (1..MaxStateStoreScanLimit, default 100) from each shard the broker
// owns; values longer than MaxValue bytes (default 1024) are cut.
type StateStoreScanRequest struct {
	Prefix   []byte `json:"prefix,omitempty"` // base64 in JSON
	After    []byte `json:"after,omitempty"`
	Limit    int    `json:"limit,omitempty"`
	MaxValue int    `json:"maxValue,omitempty"`
}

// StateStoreKey is one key with its value and version.
type StateStoreKey struct {
	Key       []byte `json:"key"`
	Value     []byte `json:"value"`
	Size      int    `json:"size"`    // the whole value's length
	Version   string `json:"version"` // HLC string form
	Shard     int32  `json:"shard"`
	ExpiresAt int64  `json:"expiresAt,omitempty"` // Unix milliseconds
}

// StateStoreScanPage is a broker's answer: keys in byte order. More is set
// when a shard had keys past the page.
type StateStoreScanPage struct {
	Keys []StateStoreKey `json:"keys"`
	More bool            `json:"more"`
}
