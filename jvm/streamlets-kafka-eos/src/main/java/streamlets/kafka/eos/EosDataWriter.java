package streamlets.kafka.eos;

import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicReference;

import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.util.ArrayData;
import org.apache.spark.sql.connector.write.DataWriter;
import org.apache.spark.sql.connector.write.WriterCommitMessage;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;

/**
 * One task's writer: its own producer, transactional.id = prefix-<Spark partition id>.
 * initTransactions at creation fences every earlier producer of that id (an earlier attempt of
 * this task, a zombie executor, a leftover of a crashed run) and aborts its open transaction.
 * commit() flushes and leaves the transaction open for the driver; abort() aborts it.
 */
final class EosDataWriter implements DataWriter<InternalRow> {
    private final EosKafkaSink.Layout layout;
    private final int partitionId;
    private final long taskId;
    private final boolean skip;
    private final String transactionalId;
    private final ResumableProducer producer;
    private final Map<Integer, Long> counts = new ConcurrentHashMap<>();
    private final AtomicReference<Exception> failure = new AtomicReference<>();
    private long sent;
    private boolean closed;

    EosDataWriter(EosKafkaSink.Layout layout, Properties producerConfig, String prefix, int partitionId, long taskId,
                  boolean skip) {
        this.layout = layout;
        this.partitionId = partitionId;
        this.taskId = taskId;
        this.skip = skip;
        this.transactionalId = prefix + "-" + partitionId;
        if (skip) {
            producer = null;
        } else {
            producer = new ResumableProducer(producerConfig, transactionalId);
            producer.initTransactions();
            producer.beginTransaction();
        }
    }

    @Override
    public void write(InternalRow row) {
        if (skip) {
            return;
        }
        Exception failed = failure.get();
        if (failed != null) {
            throw new IllegalStateException("Kafka send failed in " + transactionalId, failed);
        }
        byte[] key = bytes(row, layout.key, layout.keyType);
        byte[] value = bytes(row, layout.value, layout.valueType);
        Integer partition = layout.partition < 0 || row.isNullAt(layout.partition) ? null : row.getInt(layout.partition);
        RecordHeaders headers = new RecordHeaders();
        if (layout.headers >= 0 && !row.isNullAt(layout.headers)) {
            ArrayData array = row.getArray(layout.headers);
            for (int i = 0; i < array.numElements(); i++) {
                InternalRow h = array.getStruct(i, 2);
                headers.add(new RecordHeader(h.getUTF8String(0).toString(), h.isNullAt(1) ? null : h.getBinary(1)));
            }
        }
        producer.send(new ProducerRecord<>(layout.topic, partition, key, value, headers), (meta, e) -> {
            if (e != null) {
                failure.compareAndSet(null, e);
            } else {
                counts.merge(meta.partition(), 1L, Long::sum);
            }
        });
        sent++;
    }

    private static String executor() {
        org.apache.spark.SparkEnv env = org.apache.spark.SparkEnv.get();
        return env == null ? "?" : env.executorId();
    }

    private static byte[] bytes(InternalRow row, int i, DataType type) {
        if (i < 0 || row.isNullAt(i)) {
            return null;
        }
        return type.equals(DataTypes.StringType) ? row.getUTF8String(i).getBytes() : row.getBinary(i);
    }

    @Override
    public WriterCommitMessage commit() {
        if (skip || sent == 0) {
            close();
            return new TxnCommit(partitionId, taskId, null, -1, (short) -1, Map.of(), executor());
        }
        producer.flush();
        Exception failed = failure.get();
        if (failed != null) {
            throw new IllegalStateException("Kafka send failed in " + transactionalId, failed);
        }
        TxnCommit message = new TxnCommit(partitionId, taskId, transactionalId, producer.producerId(),
                producer.epoch(), counts, executor());
        producer.closeKeepingTransaction(); // open, flushed: the driver commits it
        closed = true;
        return message;
    }

    @Override
    public void abort() {
        if (producer != null && !closed) {
            try {
                producer.abortTransaction();
            } finally {
                close();
            }
        }
    }

    @Override
    public void close() {
        if (producer != null && !closed) {
            closed = true;
            producer.closeKeepingTransaction();
        }
    }
}
