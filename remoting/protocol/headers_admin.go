package protocol

// Headers of the admin requests mqadmin sends to brokers, and of the
// broker-to-client calls they cause. Field names are RocketMQ 4.9.8's (its
// extFields keys are the Java field names: "isForce", "jstackEnable").

// ResetOffsetRequestHeader is INVOKE_BROKER_TO_RESET_OFFSET (222) and
// RESET_CONSUMER_CLIENT_OFFSET (220, broker to client): topic!, group!,
// timestamp! (ms; -1 = the queues' ends), isForce! (also move offsets
// forward), and RocketMQ 5's queueId (one queue only; -1 or none: every
// queue) and offset (that queue's new offset; -1 or none: the one at
// timestamp), which its mqadmin resetOffsetByTime -q sends.
type ResetOffsetRequestHeader struct {
	Topic      string
	Group      string
	Timestamp  int64
	IsForce    bool
	QueueID    int32
	HasQueueID bool
	Offset     int64
	HasOffset  bool
}

// GetConsumerStatusRequestHeader is INVOKE_BROKER_TO_GET_CONSUMER_STATUS
// (223) and GET_CONSUMER_STATUS_FROM_CLIENT (221, broker to client):
// topic!, group!, clientAddr (a client id; empty = every client).
type GetConsumerStatusRequestHeader struct {
	Topic      string
	Group      string
	ClientAddr string
}

// GetConsumerRunningInfoRequestHeader is GET_CONSUMER_RUNNING_INFO (307):
// consumerGroup!, clientId!, jstackEnable.
type GetConsumerRunningInfoRequestHeader struct {
	ConsumerGroup string
	ClientID      string
	JstackEnable  bool
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

// TopicGroupHeader is QUERY_CONSUME_TIME_SPAN (303): topic!, group!.
type TopicGroupHeader struct {
	Topic string
	Group string
}

// CloneGroupOffsetRequestHeader is CLONE_GROUP_OFFSET (314): srcGroup!,
// destGroup!, topic (empty = every topic of srcGroup), offline.
type CloneGroupOffsetRequestHeader struct {
	SrcGroup  string
	DestGroup string
	Topic     string
	Offline   bool
}

// GetConsumeStatsInBrokerHeader is GET_BROKER_CONSUME_STATS (317): isOrder
// (only ordered topics).
type GetConsumeStatsInBrokerHeader struct {
	IsOrder bool
}

// ViewBrokerStatsDataRequestHeader is VIEW_BROKER_STATS_DATA (315):
// statsName! (TOPIC_PUT_NUMS, GROUP_GET_NUMS, ...), statsKey! (a topic, or
// topic@group).
type ViewBrokerStatsDataRequestHeader struct {
	StatsName string
	StatsKey  string
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

// DeleteSubscriptionGroupRequestHeader is DELETE_SUBSCRIPTIONGROUP (207):
// groupName!, removeOffset (also forget the group's offsets).
type DeleteSubscriptionGroupRequestHeader struct {
	GroupName    string
	RemoveOffset bool
}

// QueryByConsumerHeader is QUERY_TOPICS_BY_CONSUMER (343: group!) and
// QUERY_SUBSCRIPTION_BY_CONSUMER (345: group!, topic!), RocketMQ 5 codes
// newer admin tools send.
type QueryByConsumerHeader struct {
	Group string
	Topic string
}

// GetBrokerConfigResponseHeader answers GET_BROKER_CONFIG (26): version,
// the broker's topic data version as JSON.
type GetBrokerConfigResponseHeader struct {
	Version string
}
