package protocol

// NotifyMetadataChanged is SmartGo's own request code, master to slave, in
// its private range beside ForwardReplyMessage (9130). A master sends it,
// one way and without header or body, to each connected slave that gave
// its remoting address in the HA handshake (store/ha/wire.go) whenever its
// topic or subscription group table changed; the slave then copies the
// master's metadata at once instead of at its next
// broker.slave_sync_interval, so a change made just before a failover
// survives the promotion. A slave answers Success (when asked with a
// response); any other broker ignores it. The notice carries nothing: the
// slave copies from the master it follows, never from the sender.
const NotifyMetadataChanged RequestCode = 9140
