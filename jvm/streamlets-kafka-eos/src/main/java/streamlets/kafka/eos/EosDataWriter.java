package streamlets.kafka.eos;

import java.util.Map;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicReference;

import org.apache.kafka.clients.producer.Callback;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.util.ArrayData;
import org.apache.spark.sql.connector.write.DataWriter;
import org.apache.spark.sql.connector.write.WriterCommitMessage;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;

/**
 * One task's writer: a transactional producer of transactional.id = prefix-<Spark partition id>.
 * It continues on the producer its executor kept from the last batch's task of that id when the
 * driver committed that task's transaction (TaskProducers); otherwise it starts a new one, whose
 * initTransactions fences every earlier producer of that id (an earlier attempt of this task, a
 * zombie executor, a leftover of a crashed run) and aborts its open transaction.
 * commit() flushes and leaves the transaction open for the driver (the producer is kept for the
 * next batch); abort() aborts it and closes the producer.
 */
final class EosDataWriter implements DataWriter<InternalRow> {
    private final EosKafkaSink.Layout layout;
    private final int partitionId;
    private final long taskId;
    private final boolean skip;
    private final String transactionalId;
    private final String poolKey;
    private final String token = Long.toHexString(java.util.concurrent.ThreadLocalRandom.current().nextLong());
    private final ResumableProducer producer;
    /** Records acknowledged per Kafka partition: written by the producer's I/O thread only (its
     * callbacks), read after flush(), which waits for them. */
    private long[] counts = new long[0];
    private final AtomicReference<Exception> failure = new AtomicReference<>();
    private final Callback onSent = this::sent; // one callback for every record
    private long sent;
    private boolean closed;

    /** `committed`: transactional id -> token of the transactions the driver committed last
     * (EosCommitter.committed()). */
    EosDataWriter(EosKafkaSink.Layout layout, Properties producerConfig, String prefix, int partitionId, long taskId,
                  boolean skip, Map<String, String> committed) {
        this.layout = layout;
        this.partitionId = partitionId;
        this.taskId = taskId;
        this.skip = skip;
        this.transactionalId = prefix + "-" + partitionId;
        this.poolKey = TaskProducers.key(transactionalId, producerConfig);
        if (skip) {
            producer = null;
        } else {
            producer = continued(TaskProducers.take(poolKey, committed.get(transactionalId)), producerConfig);
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
        RecordHeaders headers = null;
        if (layout.headers >= 0 && !row.isNullAt(layout.headers)) {
            headers = new RecordHeaders();
            ArrayData array = row.getArray(layout.headers);
            for (int i = 0; i < array.numElements(); i++) {
                InternalRow h = array.getStruct(i, 2);
                headers.add(new RecordHeader(h.getUTF8String(0).toString(), h.isNullAt(1) ? null : h.getBinary(1)));
            }
        }
        producer.send(new ProducerRecord<>(layout.topic, partition, key, value, headers), onSent);
        sent++;
    }

    /** `kept` (its last transaction committed by the driver) ready for a new transaction, else a new
     * producer after initTransactions. */
    private ResumableProducer continued(ResumableProducer kept, Properties producerConfig) {
        if (kept != null) {
            try {
                kept.continueAfterCommit();
                return kept;
            } catch (RuntimeException e) {
                kept.closeKeepingTransaction();
            }
        }
        ResumableProducer fresh = new ResumableProducer(producerConfig, transactionalId);
        try {
            fresh.initTransactions();
        } catch (RuntimeException e) {
            fresh.closeKeepingTransaction();
            throw e;
        }
        return fresh;
    }

    private void sent(RecordMetadata meta, Exception e) {
        if (e != null) {
            failure.compareAndSet(null, e);
            return;
        }
        int p = meta.partition();
        if (p >= counts.length) {
            counts = java.util.Arrays.copyOf(counts, Math.max(p + 1, 2 * counts.length));
        }
        counts[p]++;
    }

    /** The acknowledged records per Kafka partition (after flush()). */
    private Map<Integer, Long> counts() {
        Map<Integer, Long> out = new java.util.TreeMap<>();
        for (int p = 0; p < counts.length; p++) {
            if (counts[p] > 0) {
                out.put(p, counts[p]);
            }
        }
        return out;
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
            if (producer == null) {
                return new TxnCommit(partitionId, taskId, null, -1, (short) -1, Map.of(), executor(), null);
            }
            producer.commitTransaction(); // empty: completed locally, no request (no partition was added)
            TaskProducers.keep(poolKey, producer, token); // continued when the driver's batch succeeds
            closed = true;
            return new TxnCommit(partitionId, taskId, null, -1, (short) -1, Map.of(), executor(), token);
        }
        producer.flush();
        Exception failed = failure.get();
        if (failed != null) {
            throw new IllegalStateException("Kafka send failed in " + transactionalId, failed);
        }
        TxnCommit message = new TxnCommit(partitionId, taskId, transactionalId, producer.producerId(),
                producer.epoch(), counts(), executor(), token);
        TaskProducers.keep(poolKey, producer, token); // open, flushed: the driver commits it
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
