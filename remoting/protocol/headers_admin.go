package protocol

// Headers of the admin requests mqadmin sends to brokers, and of the
// broker-to-client calls they cause. Field names are RocketMQ 4.9.8's (its
// extFields keys are the Java field names: "isForce", "jstackEnable").

// ResetOffsetRequestHeader is INVOKE_BROKER_TO_RESET_OFFSET (222) and
// RESET_CONSUMER_CLIENT_OFFSET (220, broker to client): topic!, group!,
// timestamp! (ms; -1 = the queues' ends), isForce! (also move offsets
// forward).
type ResetOffsetRequestHeader struct {
	Topic     string
	Group     string
	Timestamp int64
	IsForce   bool
}

// EncodeFields implements HeaderEncoder.
func (h *ResetOffsetRequestHeader) EncodeFields(f ExtFields) {
	f["topic"] = h.Topic
	f["group"] = h.Group
	putI64(f, "timestamp", h.Timestamp)
	putBool(f, "isForce", h.IsForce)
}

// DecodeFields implements HeaderDecoder.
func (h *ResetOffsetRequestHeader) DecodeFields(f ExtFields) error {
	r := fieldReader{f: f, hdr: "ResetOffsetRequestHeader"}
	h.Topic = r.str("topic", true)
	h.Group = r.str("group", true)
	h.Timestamp = r.i64("timestamp", true)
	h.IsForce = r.boolean("isForce", true)
	return r.err
}

// GetConsumerStatusRequestHeader is INVOKE_BROKER_TO_GET_CONSUMER_STATUS
// (223) and GET_CONSUMER_STATUS_FROM_CLIENT (221, broker to client):
// topic!, group!, clientAddr (a client id; empty = every client).
type GetConsumerStatusRequestHeader struct {
	Topic      string
	Group      string
	ClientAddr string
}

// EncodeFields implements HeaderEncoder.
func (h *GetConsumerStatusRequestHeader) EncodeFields(f ExtFields) {
	f["topic"] = h.Topic
	f["group"] = h.Group
	putOptStr(f, "clientAddr", h.ClientAddr)
}

// DecodeFields implements HeaderDecoder.
func (h *GetConsumerStatusRequestHeader) DecodeFields(f ExtFields) error {
	r := fieldReader{f: f, hdr: "GetConsumerStatusRequestHeader"}
	h.Topic = r.str("topic", true)
	h.Group = r.str("group", true)
	h.ClientAddr = r.str("clientAddr", false)
	return r.err
}

// GetConsumerRunningInfoRequestHeader is GET_CONSUMER_RUNNING_INFO (307):
// consumerGroup!, clientId!, jstackEnable.
type GetConsumerRunningInfoRequestHeader struct {
	ConsumerGroup string
	ClientID      string
	JstackEnable  bool
}

// EncodeFields implements HeaderEncoder.
func (h *GetConsumerRunningInfoRequestHeader) EncodeFields(f ExtFields) {
	f["consumerGroup"] = h.ConsumerGroup
	f["clientId"] = h.ClientID
	putBool(f, "jstackEnable", h.JstackEnable)
}

// DecodeFields implements HeaderDecoder.
func (h *GetConsumerRunningInfoRequestHeader) DecodeFields(f ExtFields) error {
	r := fieldReader{f: f, hdr: "GetConsumerRunningInfoRequestHeader"}
	h.ConsumerGroup = r.str("consumerGroup", true)
	h.ClientID = r.str("clientId", true)
	h.JstackEnable = r.boolean("jstackEnable", false)
	return r.err
}

// ConsumeMessageDirectlyRequestHeader is CONSUME_MESSAGE_DIRECTLY (309):
// consumerGroup!, clientId, msgId (an offset message id), brokerName (set
// by the broker before it forwards the request).
type ConsumeMessageDirectlyRequestHeader struct {
	ConsumerGroup string
	ClientID      string
	MsgID         string
	BrokerName    string
}

// EncodeFields implements HeaderEncoder.
func (h *ConsumeMessageDirectlyRequestHeader) EncodeFields(f ExtFields) {
	f["consumerGroup"] = h.ConsumerGroup
	putOptStr(f, "clientId", h.ClientID)
	putOptStr(f, "msgId", h.MsgID)
	putOptStr(f, "brokerName", h.BrokerName)
}

// DecodeFields implements HeaderDecoder.
func (h *ConsumeMessageDirectlyRequestHeader) DecodeFields(f ExtFields) error {
	r := fieldReader{f: f, hdr: "ConsumeMessageDirectlyResultRequestHeader"}
	h.ConsumerGroup = r.str("consumerGroup", true)
	h.ClientID = r.str("clientId", false)
	h.MsgID = r.str("msgId", false)
	h.BrokerName = r.str("brokerName", false)
	return r.err
}

// TopicGroupHeader is QUERY_CONSUME_TIME_SPAN (303): topic!, group!.
type TopicGroupHeader struct {
	Topic string
	Group string
}

// EncodeFields implements HeaderEncoder.
func (h *TopicGroupHeader) EncodeFields(f ExtFields) {
	f["topic"] = h.Topic
	f["group"] = h.Group
}

// DecodeFields implements HeaderDecoder.
func (h *TopicGroupHeader) DecodeFields(f ExtFields) error {
	r := fieldReader{f: f, hdr: "TopicGroupHeader"}
	h.Topic = r.str("topic", true)
	h.Group = r.str("group", true)
	return r.err
}

// CloneGroupOffsetRequestHeader is CLONE_GROUP_OFFSET (314): srcGroup!,
// destGroup!, topic (empty = every topic of srcGroup), offline.
type CloneGroupOffsetRequestHeader struct {
	SrcGroup  string
	DestGroup string
	Topic     string
	Offline   bool
}

// EncodeFields implements HeaderEncoder.
func (h *CloneGroupOffsetRequestHeader) EncodeFields(f ExtFields) {
	f["srcGroup"] = h.SrcGroup
	f["destGroup"] = h.DestGroup
	putOptStr(f, "topic", h.Topic)
	putBool(f, "offline", h.Offline)
}

// DecodeFields implements HeaderDecoder.
func (h *CloneGroupOffsetRequestHeader) DecodeFields(f ExtFields) error {
	r := fieldReader{f: f, hdr: "CloneGroupOffsetRequestHeader"}
	h.SrcGroup = r.str("srcGroup", true)
	h.DestGroup = r.str("destGroup", true)
	h.Topic = r.str("topic", false)
	h.Offline = r.boolean("offline", false)
	return r.err
}

// GetConsumeStatsInBrokerHeader is GET_BROKER_CONSUME_STATS (317): isOrder
// (only ordered topics).
type GetConsumeStatsInBrokerHeader struct {
	IsOrder bool
}

// EncodeFields implements HeaderEncoder.
func (h *GetConsumeStatsInBrokerHeader) EncodeFields(f ExtFields) { putBool(f, "isOrder", h.IsOrder) }

// DecodeFields implements HeaderDecoder.
func (h *GetConsumeStatsInBrokerHeader) DecodeFields(f ExtFields) error {
	r := fieldReader{f: f, hdr: "GetConsumeStatsInBrokerHeader"}
	h.IsOrder = r.boolean("isOrder", true)
	return r.err
}

// ViewBrokerStatsDataRequestHeader is VIEW_BROKER_STATS_DATA (315):
// statsName! (TOPIC_PUT_NUMS, GROUP_GET_NUMS, ...), statsKey! (a topic, or
// topic@group).
type ViewBrokerStatsDataRequestHeader struct {
	StatsName string
	StatsKey  string
}

// EncodeFields implements HeaderEncoder.
func (h *ViewBrokerStatsDataRequestHeader) EncodeFields(f ExtFields) {
	f["statsName"] = h.StatsName
	f["statsKey"] = h.StatsKey
}

// DecodeFields implements HeaderDecoder.
func (h *ViewBrokerStatsDataRequestHeader) DecodeFields(f ExtFields) error {
	r := fieldReader{f: f, hdr: "ViewBrokerStatsDataRequestHeader"}
	h.StatsName = r.str("statsName", true)
	h.StatsKey = r.str("statsKey", true)
	return r.err
}

// QueryConsumeQueueRequestHeader is QUERY_CONSUME_QUEUE (321): topic!,
// queueId!, index! (first logical offset), count!, consumerGroup.
type QueryConsumeQueueRequestHeader struct {
	Topic         string
	QueueID       int32
	Index         int64
	Count         int32
	ConsumerGroup string
}

// EncodeFields implements HeaderEncoder.
func (h *QueryConsumeQueueRequestHeader) EncodeFields(f ExtFields) {
	f["topic"] = h.Topic
	putI32(f, "queueId", h.QueueID)
	putI64(f, "index", h.Index)
	putI32(f, "count", h.Count)
	putOptStr(f, "consumerGroup", h.ConsumerGroup)
}

// DecodeFields implements HeaderDecoder.
func (h *QueryConsumeQueueRequestHeader) DecodeFields(f ExtFields) error {
	r := fieldReader{f: f, hdr: "QueryConsumeQueueRequestHeader"}
	h.Topic = r.str("topic", true)
	h.QueueID = r.i32("queueId", true)
	h.Index = r.i64("index", true)
	h.Count = r.i32("count", true)
	h.ConsumerGroup = r.str("consumerGroup", false)
	return r.err
}

// DeleteSubscriptionGroupRequestHeader is DELETE_SUBSCRIPTIONGROUP (207):
// groupName!, removeOffset (also forget the group's offsets).
type DeleteSubscriptionGroupRequestHeader struct {
	GroupName    string
	RemoveOffset bool
}

// EncodeFields implements HeaderEncoder.
func (h *DeleteSubscriptionGroupRequestHeader) EncodeFields(f ExtFields) {
	f["groupName"] = h.GroupName
	putBool(f, "removeOffset", h.RemoveOffset)
}

// DecodeFields implements HeaderDecoder.
func (h *DeleteSubscriptionGroupRequestHeader) DecodeFields(f ExtFields) error {
	r := fieldReader{f: f, hdr: "DeleteSubscriptionGroupRequestHeader"}
	h.GroupName = r.str("groupName", true)
	h.RemoveOffset = r.boolean("removeOffset", false)
	return r.err
}

// QueryByConsumerHeader is QUERY_TOPICS_BY_CONSUMER (343: group!) and
// QUERY_SUBSCRIPTION_BY_CONSUMER (345: group!, topic!), RocketMQ 5 codes
// newer admin tools send.
type QueryByConsumerHeader struct {
	Group string
	Topic string
}

// EncodeFields implements HeaderEncoder.
func (h *QueryByConsumerHeader) EncodeFields(f ExtFields) {
	f["group"] = h.Group
	putOptStr(f, "topic", h.Topic)
}

// DecodeFields implements HeaderDecoder.
func (h *QueryByConsumerHeader) DecodeFields(f ExtFields) error {
	r := fieldReader{f: f, hdr: "QueryByConsumerHeader"}
	h.Group = r.str("group", true)
	h.Topic = r.str("topic", false)
	return r.err
}

// GetBrokerConfigResponseHeader answers GET_BROKER_CONFIG (26): version,
// the broker's topic data version as JSON.
type GetBrokerConfigResponseHeader struct {
	Version string
}

// EncodeFields implements HeaderEncoder.
func (h *GetBrokerConfigResponseHeader) EncodeFields(f ExtFields) { f["version"] = h.Version }

// DecodeFields implements HeaderDecoder.
func (h *GetBrokerConfigResponseHeader) DecodeFields(f ExtFields) error {
	r := fieldReader{f: f, hdr: "GetBrokerConfigResponseHeader"}
	h.Version = r.str("version", false)
	return r.err
}
