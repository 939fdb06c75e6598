package wire

// methodKey is a method's class id in the high half and method id in the
// low half.
func methodKey(class, method uint16) uint32 { return uint32(class)<<16 | uint32(method) }

// newMethod returns an empty method of the given ids, or nil.
func newMethod(key uint32) Method {
	switch key {
	case 10<<16 | 10:
		return new(ConnectionStart)
	case 10<<16 | 11:
		return new(ConnectionStartOk)
	case 10<<16 | 20:
		return new(ConnectionSecure)
	case 10<<16 | 21:
		return new(ConnectionSecureOk)
	case 10<<16 | 30:
		return new(ConnectionTune)
	case 10<<16 | 31:
		return new(ConnectionTuneOk)
	case 10<<16 | 40:
		return new(ConnectionOpen)
	case 10<<16 | 41:
		return new(ConnectionOpenOk)
	case 10<<16 | 50:
		return new(ConnectionClose)
	case 10<<16 | 51:
		return new(ConnectionCloseOk)
	case 10<<16 | 60:
		return new(ConnectionBlocked)
	case 10<<16 | 61:
		return new(ConnectionUnblocked)
	case 10<<16 | 70:
		return new(ConnectionUpdateSecret)
	case 10<<16 | 71:
		return new(ConnectionUpdateSecretOk)
	case 20<<16 | 10:
		return new(ChannelOpen)
	case 20<<16 | 11:
		return new(ChannelOpenOk)
	case 20<<16 | 20:
		return new(ChannelFlow)
	case 20<<16 | 21:
		return new(ChannelFlowOk)
	case 20<<16 | 40:
		return new(ChannelClose)
	case 20<<16 | 41:
		return new(ChannelCloseOk)
	case 40<<16 | 10:
		return new(ExchangeDeclare)
	case 40<<16 | 11:
		return new(ExchangeDeclareOk)
	case 40<<16 | 20:
		return new(ExchangeDelete)
	case 40<<16 | 21:
		return new(ExchangeDeleteOk)
	case 40<<16 | 30:
		return new(ExchangeBind)
	case 40<<16 | 31:
		return new(ExchangeBindOk)
	case 40<<16 | 40:
		return new(ExchangeUnbind)
	case 40<<16 | 51:
		return new(ExchangeUnbindOk)
	case 50<<16 | 10:
		return new(QueueDeclare)
	case 50<<16 | 11:
		return new(QueueDeclareOk)
	case 50<<16 | 20:
		return new(QueueBind)
	case 50<<16 | 21:
		return new(QueueBindOk)
	case 50<<16 | 30:
		return new(QueuePurge)
	case 50<<16 | 31:
		return new(QueuePurgeOk)
	case 50<<16 | 40:
		return new(QueueDelete)
	case 50<<16 | 41:
		return new(QueueDeleteOk)
	case 50<<16 | 50:
		return new(QueueUnbind)
	case 50<<16 | 51:
		return new(QueueUnbindOk)
	case 60<<16 | 10:
		return new(BasicQos)
	case 60<<16 | 11:
		return new(BasicQosOk)
	case 60<<16 | 20:
		return new(BasicConsume)
	case 60<<16 | 21:
		return new(BasicConsumeOk)
	case 60<<16 | 30:
		return new(BasicCancel)
	case 60<<16 | 31:
		return new(BasicCancelOk)
	case 60<<16 | 40:
		return new(BasicPublish)
	case 60<<16 | 50:
		return new(BasicReturn)
	case 60<<16 | 60:
		return new(BasicDeliver)
	case 60<<16 | 70:
		return new(BasicGet)
	case 60<<16 | 71:
		return new(BasicGetOk)
	case 60<<16 | 72:
		return new(BasicGetEmpty)
	case 60<<16 | 80:
		return new(BasicAck)
	case 60<<16 | 90:
		return new(BasicReject)
	case 60<<16 | 100:
		return new(BasicRecoverAsync)
	case 60<<16 | 110:
		return new(BasicRecover)
	case 60<<16 | 111:
		return new(BasicRecoverOk)
	case 60<<16 | 120:
		return new(BasicNack)
	case 90<<16 | 10:
		return new(TxSelect)
	case 90<<16 | 11:
		return new(TxSelectOk)
	case 90<<16 | 20:
		return new(TxCommit)
	case 90<<16 | 21:
		return new(TxCommitOk)
	case 90<<16 | 30:
		return new(TxRollback)
	case 90<<16 | 31:
		return new(TxRollbackOk)
	case 85<<16 | 10:
		return new(ConfirmSelect)
	case 85<<16 | 11:
		return new(ConfirmSelectOk)
	}
	return nil
}

// methodNames names every method the codec knows, as the spec does.
var methodNames = map[uint32]string{
	10<<16 | 10:  "connection.start",
	10<<16 | 11:  "connection.start-ok",
	10<<16 | 20:  "connection.secure",
	10<<16 | 21:  "connection.secure-ok",
	10<<16 | 30:  "connection.tune",
	10<<16 | 31:  "connection.tune-ok",
	10<<16 | 40:  "connection.open",
	10<<16 | 41:  "connection.open-ok",
	10<<16 | 50:  "connection.close",
	10<<16 | 51:  "connection.close-ok",
	10<<16 | 60:  "connection.blocked",
	10<<16 | 61:  "connection.unblocked",
	10<<16 | 70:  "connection.update-secret",
	10<<16 | 71:  "connection.update-secret-ok",
	20<<16 | 10:  "channel.open",
	20<<16 | 11:  "channel.open-ok",
	20<<16 | 20:  "channel.flow",
	20<<16 | 21:  "channel.flow-ok",
	20<<16 | 40:  "channel.close",
	20<<16 | 41:  "channel.close-ok",
	40<<16 | 10:  "exchange.declare",
	40<<16 | 11:  "exchange.declare-ok",
	40<<16 | 20:  "exchange.delete",
	40<<16 | 21:  "exchange.delete-ok",
	40<<16 | 30:  "exchange.bind",
	40<<16 | 31:  "exchange.bind-ok",
	40<<16 | 40:  "exchange.unbind",
	40<<16 | 51:  "exchange.unbind-ok",
	50<<16 | 10:  "queue.declare",
	50<<16 | 11:  "queue.declare-ok",
	50<<16 | 20:  "queue.bind",
	50<<16 | 21:  "queue.bind-ok",
	50<<16 | 30:  "queue.purge",
	50<<16 | 31:  "queue.purge-ok",
	50<<16 | 40:  "queue.delete",
	50<<16 | 41:  "queue.delete-ok",
	50<<16 | 50:  "queue.unbind",
	50<<16 | 51:  "queue.unbind-ok",
	60<<16 | 10:  "basic.qos",
	60<<16 | 11:  "basic.qos-ok",
	60<<16 | 20:  "basic.consume",
	60<<16 | 21:  "basic.consume-ok",
	60<<16 | 30:  "basic.cancel",
	60<<16 | 31:  "basic.cancel-ok",
	60<<16 | 40:  "basic.publish",
	60<<16 | 50:  "basic.return",
	60<<16 | 60:  "basic.deliver",
	60<<16 | 70:  "basic.get",
	60<<16 | 71:  "basic.get-ok",
	60<<16 | 72:  "basic.get-empty",
	60<<16 | 80:  "basic.ack",
	60<<16 | 90:  "basic.reject",
	60<<16 | 100: "basic.recover-async",
	60<<16 | 110: "basic.recover",
	60<<16 | 111: "basic.recover-ok",
	60<<16 | 120: "basic.nack",
	90<<16 | 10:  "tx.select",
	90<<16 | 11:  "tx.select-ok",
	90<<16 | 20:  "tx.commit",
	90<<16 | 21:  "tx.commit-ok",
	90<<16 | 30:  "tx.rollback",
	90<<16 | 31:  "tx.rollback-ok",
	85<<16 | 10:  "confirm.select",
	85<<16 | 11:  "confirm.select-ok",
}
