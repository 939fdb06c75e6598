package protocol

// START_SHARE_GROUP (900, SmartGo's own) starts a consumer group at the
// end of a topic's queues on one broker, decided by the broker at once
// (the MQTT bridge's shared subscriptions, bridge/shares.go): several
// nodes that start the same group at the same moment never move it past
// a start another one already made. The request's body is a
// StartShareGroupRequest, the answer's a StartShareGroupResponse (JSON,
// field names as tagged):
//
//	{"group":"MQTT_SHARE_g_…","topic":"mqtt_device","starter":"node-1/7","restart":true}
//	{"offsets":{"0":12,"1":9}}
//
// Per queue of the topic on this broker (its write queues):
//   - restart and nobody relies on the group's offsets (no member of the
//     group is connected to the broker and no other starter started it
//     since its last member joined): the offset becomes the queue's max
//     offset, whatever was stored;
//   - otherwise a queue with a stored offset keeps it, one without gets
//     the queue's max offset.
//
// Either way the starter is noted as relying on the group until a member
// of it joins (a heartbeat) or half a minute passes. The answer
// lists every queue's offset after the decision.
type StartShareGroupRequest struct {
	Group   string `json:"group"`
	Topic   string `json:"topic"`
	Starter string `json:"starter"` // the same for every request of one start (one per broker and topic)
	Restart bool   `json:"restart"`
}

// StartShareGroupResponse answers START_SHARE_GROUP: queue id -> the
// group's offset.
type StartShareGroupResponse struct {
	Offsets map[int32]int64 `json:"offsets"`
}
