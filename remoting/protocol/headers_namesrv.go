package protocol

// Headers of the name-server (registry) requests. Field names in comments
// are the extFields keys; "!" marks a field Java requires.

// RegisterBrokerRequestHeader is REGISTER_BROKER (103): brokerName!,
// brokerAddr!, clusterName!, haServerAddr!, brokerId!, compressed,
// bodyCrc32 (0 = not checked).
type RegisterBrokerRequestHeader struct {
	BrokerName   string
	BrokerAddr   string
	ClusterName  string
	HAServerAddr string
	BrokerID     int64
	Compressed   bool
	BodyCRC32    int32
}

// RegisterBrokerResponseHeader answers REGISTER_BROKER: haServerAddr and
// masterAddr, set only for slaves.
type RegisterBrokerResponseHeader struct {
	HAServerAddr string
	MasterAddr   string
}

// BrokerIdentityHeader is the header of UNREGISTER_BROKER (104) and
// QUERY_DATA_VERSION (322): brokerName!, brokerAddr!, clusterName!,
// brokerId!.
type BrokerIdentityHeader struct {
	BrokerName  string
	BrokerAddr  string
	ClusterName string
	BrokerID    int64
}

// UnregisterBrokerRequestHeader is UNREGISTER_BROKER (104).
type UnregisterBrokerRequestHeader = BrokerIdentityHeader

// QueryDataVersionRequestHeader is QUERY_DATA_VERSION (322); the body is the
// broker's DataVersion.
type QueryDataVersionRequestHeader = BrokerIdentityHeader

// QueryDataVersionResponseHeader answers QUERY_DATA_VERSION: changed!.
type QueryDataVersionResponseHeader struct {
	Changed bool
}

// GetRouteInfoRequestHeader is GET_ROUTEINFO_BY_TOPIC (105): topic!,
// acceptStandardJsonOnly.
type GetRouteInfoRequestHeader struct {
	Topic                  string
	AcceptStandardJSONOnly bool
}

// KVConfigRequestHeader is PUT_KV_CONFIG (100: namespace!, key!, value!),
// GET_KV_CONFIG (101: namespace!, key!), DELETE_KV_CONFIG (102: namespace!,
// key!) and GET_KVLIST_BY_NAMESPACE (219: namespace!). Which fields are
// required depends on Code; set it before decoding.
type KVConfigRequestHeader struct {
	Code      int32
	Namespace string
	Key       string
	Value     string
}

// GetKVConfigResponseHeader answers GET_KV_CONFIG: value.
type GetKVConfigResponseHeader struct {
	Value string
}

// GetTopicsByClusterRequestHeader is GET_TOPICS_BY_CLUSTER (224): cluster!.
type GetTopicsByClusterRequestHeader struct {
	Cluster string
}

// BrokerPermRequestHeader is WIPE_WRITE_PERM_OF_BROKER (205) and
// ADD_WRITE_PERM_OF_BROKER (327): brokerName!.
type BrokerPermRequestHeader struct {
	BrokerName string
}

// WipeWritePermResponseHeader answers WIPE_WRITE_PERM_OF_BROKER:
// wipeTopicCount!.
type WipeWritePermResponseHeader struct {
	WipeTopicCount int32
}

// AddWritePermResponseHeader answers ADD_WRITE_PERM_OF_BROKER:
// addTopicCount!.
type AddWritePermResponseHeader struct {
	AddTopicCount int32
}

// DeleteTopicInNamesrvRequestHeader is DELETE_TOPIC_IN_NAMESRV (216):
// topic!, clusterName (empty = every cluster).
type DeleteTopicInNamesrvRequestHeader struct {
	Topic       string
	ClusterName string
}
