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

// EncodeFields implements HeaderEncoder.
func (h *RegisterBrokerRequestHeader) EncodeFields(f ExtFields) {
	f["brokerName"] = h.BrokerName
	f["brokerAddr"] = h.BrokerAddr
	f["clusterName"] = h.ClusterName
	f["haServerAddr"] = h.HAServerAddr
	putI64(f, "brokerId", h.BrokerID)
	putBool(f, "compressed", h.Compressed)
	putI32(f, "bodyCrc32", h.BodyCRC32)
}

// DecodeFields implements HeaderDecoder.
func (h *RegisterBrokerRequestHeader) DecodeFields(f ExtFields) error {
	r := fieldReader{f: f, hdr: "RegisterBrokerRequestHeader"}
	h.BrokerName = r.str("brokerName", true)
	h.BrokerAddr = r.str("brokerAddr", true)
	h.ClusterName = r.str("clusterName", true)
	h.HAServerAddr = r.str("haServerAddr", true)
	h.BrokerID = r.i64("brokerId", true)
	h.Compressed = r.boolean("compressed", false)
	h.BodyCRC32 = r.i32("bodyCrc32", false)
	return r.err
}

// RegisterBrokerResponseHeader answers REGISTER_BROKER: haServerAddr and
// masterAddr, set only for slaves.
type RegisterBrokerResponseHeader struct {
	HAServerAddr string
	MasterAddr   string
}

// EncodeFields implements HeaderEncoder.
func (h *RegisterBrokerResponseHeader) EncodeFields(f ExtFields) {
	putOptStr(f, "haServerAddr", h.HAServerAddr)
	putOptStr(f, "masterAddr", h.MasterAddr)
}

// DecodeFields implements HeaderDecoder.
func (h *RegisterBrokerResponseHeader) DecodeFields(f ExtFields) error {
	r := fieldReader{f: f, hdr: "RegisterBrokerResponseHeader"}
	h.HAServerAddr = r.str("haServerAddr", false)
	h.MasterAddr = r.str("masterAddr", false)
	return r.err
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

// EncodeFields implements HeaderEncoder.
func (h *BrokerIdentityHeader) EncodeFields(f ExtFields) {
	f["brokerName"] = h.BrokerName
	f["brokerAddr"] = h.BrokerAddr
	f["clusterName"] = h.ClusterName
	putI64(f, "brokerId", h.BrokerID)
}

// DecodeFields implements HeaderDecoder.
func (h *BrokerIdentityHeader) DecodeFields(f ExtFields) error {
	r := fieldReader{f: f, hdr: "BrokerIdentityHeader"}
	h.BrokerName = r.str("brokerName", true)
	h.BrokerAddr = r.str("brokerAddr", true)
	h.ClusterName = r.str("clusterName", true)
	h.BrokerID = r.i64("brokerId", true)
	return r.err
}

// QueryDataVersionResponseHeader answers QUERY_DATA_VERSION: changed!.
type QueryDataVersionResponseHeader struct {
	Changed bool
}

// EncodeFields implements HeaderEncoder.
func (h *QueryDataVersionResponseHeader) EncodeFields(f ExtFields) { putBool(f, "changed", h.Changed) }

// DecodeFields implements HeaderDecoder.
func (h *QueryDataVersionResponseHeader) DecodeFields(f ExtFields) error {
	r := fieldReader{f: f, hdr: "QueryDataVersionResponseHeader"}
	h.Changed = r.boolean("changed", true)
	return r.err
}

// GetRouteInfoRequestHeader is GET_ROUTEINFO_BY_TOPIC (105): topic!,
// acceptStandardJsonOnly.
type GetRouteInfoRequestHeader struct {
	Topic                  string
	AcceptStandardJSONOnly bool
}

// EncodeFields implements HeaderEncoder.
func (h *GetRouteInfoRequestHeader) EncodeFields(f ExtFields) {
	f["topic"] = h.Topic
	if h.AcceptStandardJSONOnly {
		putBool(f, "acceptStandardJsonOnly", true)
	}
}

// DecodeFields implements HeaderDecoder.
func (h *GetRouteInfoRequestHeader) DecodeFields(f ExtFields) error {
	r := fieldReader{f: f, hdr: "GetRouteInfoRequestHeader"}
	h.Topic = r.str("topic", true)
	h.AcceptStandardJSONOnly = r.boolean("acceptStandardJsonOnly", false)
	return r.err
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

// EncodeFields implements HeaderEncoder.
func (h *KVConfigRequestHeader) EncodeFields(f ExtFields) {
	f["namespace"] = h.Namespace
	if h.Code != GetKVListByNamespace {
		f["key"] = h.Key
	}
	if h.Code == PutKVConfig {
		f["value"] = h.Value
	}
}

// DecodeFields implements HeaderDecoder.
func (h *KVConfigRequestHeader) DecodeFields(f ExtFields) error {
	r := fieldReader{f: f, hdr: "KVConfigRequestHeader"}
	h.Namespace = r.str("namespace", true)
	h.Key = r.str("key", h.Code != GetKVListByNamespace)
	h.Value = r.str("value", h.Code == PutKVConfig)
	return r.err
}

// GetKVConfigResponseHeader answers GET_KV_CONFIG: value.
type GetKVConfigResponseHeader struct {
	Value string
}

// EncodeFields implements HeaderEncoder.
func (h *GetKVConfigResponseHeader) EncodeFields(f ExtFields) { f["value"] = h.Value }

// DecodeFields implements HeaderDecoder.
func (h *GetKVConfigResponseHeader) DecodeFields(f ExtFields) error {
	r := fieldReader{f: f, hdr: "GetKVConfigResponseHeader"}
	h.Value = r.str("value", false)
	return r.err
}

// GetTopicsByClusterRequestHeader is GET_TOPICS_BY_CLUSTER (224): cluster!.
type GetTopicsByClusterRequestHeader struct {
	Cluster string
}

// EncodeFields implements HeaderEncoder.
func (h *GetTopicsByClusterRequestHeader) EncodeFields(f ExtFields) { f["cluster"] = h.Cluster }

// DecodeFields implements HeaderDecoder.
func (h *GetTopicsByClusterRequestHeader) DecodeFields(f ExtFields) error {
	r := fieldReader{f: f, hdr: "GetTopicsByClusterRequestHeader"}
	h.Cluster = r.str("cluster", true)
	return r.err
}

// BrokerPermRequestHeader is WIPE_WRITE_PERM_OF_BROKER (205) and
// ADD_WRITE_PERM_OF_BROKER (327): brokerName!.
type BrokerPermRequestHeader struct {
	BrokerName string
}

// EncodeFields implements HeaderEncoder.
func (h *BrokerPermRequestHeader) EncodeFields(f ExtFields) { f["brokerName"] = h.BrokerName }

// DecodeFields implements HeaderDecoder.
func (h *BrokerPermRequestHeader) DecodeFields(f ExtFields) error {
	r := fieldReader{f: f, hdr: "BrokerPermRequestHeader"}
	h.BrokerName = r.str("brokerName", true)
	return r.err
}

// WipeWritePermResponseHeader answers WIPE_WRITE_PERM_OF_BROKER:
// wipeTopicCount!.
type WipeWritePermResponseHeader struct {
	WipeTopicCount int32
}

// EncodeFields implements HeaderEncoder.
func (h *WipeWritePermResponseHeader) EncodeFields(f ExtFields) {
	putI32(f, "wipeTopicCount", h.WipeTopicCount)
}

// DecodeFields implements HeaderDecoder.
func (h *WipeWritePermResponseHeader) DecodeFields(f ExtFields) error {
	r := fieldReader{f: f, hdr: "WipeWritePermResponseHeader"}
	h.WipeTopicCount = r.i32("wipeTopicCount", true)
	return r.err
}

// AddWritePermResponseHeader answers ADD_WRITE_PERM_OF_BROKER:
// addTopicCount!.
type AddWritePermResponseHeader struct {
	AddTopicCount int32
}

// EncodeFields implements HeaderEncoder.
func (h *AddWritePermResponseHeader) EncodeFields(f ExtFields) {
	putI32(f, "addTopicCount", h.AddTopicCount)
}

// DecodeFields implements HeaderDecoder.
func (h *AddWritePermResponseHeader) DecodeFields(f ExtFields) error {
	r := fieldReader{f: f, hdr: "AddWritePermResponseHeader"}
	h.AddTopicCount = r.i32("addTopicCount", true)
	return r.err
}

// DeleteTopicInNamesrvRequestHeader is DELETE_TOPIC_IN_NAMESRV (216):
// topic!, clusterName (empty = every cluster).
type DeleteTopicInNamesrvRequestHeader struct {
	Topic       string
	ClusterName string
}

// EncodeFields implements HeaderEncoder.
func (h *DeleteTopicInNamesrvRequestHeader) EncodeFields(f ExtFields) {
	f["topic"] = h.Topic
	putOptStr(f, "clusterName", h.ClusterName)
}

// DecodeFields implements HeaderDecoder.
func (h *DeleteTopicInNamesrvRequestHeader) DecodeFields(f ExtFields) error {
	r := fieldReader{f: f, hdr: "DeleteTopicInNamesrvRequestHeader"}
	h.Topic = r.str("topic", true)
	h.ClusterName = r.str("clusterName", false)
	return r.err
}
