package streamlets.kafka.eos;

import java.io.Serializable;
import java.util.EnumSet;
import java.util.HashMap;
import java.util.Map;
import java.util.Properties;
import java.util.Set;

import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.connector.catalog.SupportsWrite;
import org.apache.spark.sql.connector.catalog.Table;
import org.apache.spark.sql.connector.catalog.TableCapability;
import org.apache.spark.sql.connector.catalog.TableProvider;
import org.apache.spark.sql.connector.expressions.Transform;
import org.apache.spark.sql.connector.write.DataWriter;
import org.apache.spark.sql.connector.write.LogicalWriteInfo;
import org.apache.spark.sql.connector.write.PhysicalWriteInfo;
import org.apache.spark.sql.connector.write.SupportsTruncate;
import org.apache.spark.sql.internal.connector.SupportsStreamingUpdateAsAppend;
import org.apache.spark.sql.connector.write.Write;
import org.apache.spark.sql.connector.write.WriteBuilder;
import org.apache.spark.sql.connector.write.WriterCommitMessage;
import org.apache.spark.sql.connector.write.streaming.StreamingDataWriterFactory;
import org.apache.spark.sql.connector.write.streaming.StreamingWrite;
import org.apache.spark.sql.sources.DataSourceRegister;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/**
 * Spark streaming sink (format "streamlets-kafka-eos"): executors write each task's rows
 * (key, value: binary or string; optional partition int; optional headers
 * array&lt;struct&lt;key string, value binary&gt;&gt;) in the task's own Kafka transaction and leave it
 * open; the driver's commit hands the tasks' {@link TxnCommit}s to an {@link EosCommitter}.
 *
 * <p>Options: kafka.bootstrap.servers, topic, transactional.id.prefix, ledger.topic and
 * checkpoint (LedgerCommitter's), committer (class name, optional), kafka.* (producer settings;
 * consumer-only ones, such as a Kafka source's isolation.level, are left out).
 */
public final class EosKafkaSink implements TableProvider, DataSourceRegister {
    public static final String SHORT_NAME = "streamlets-kafka-eos";

    @Override
    public String shortName() {
        return SHORT_NAME;
    }

    @Override
    public StructType inferSchema(CaseInsensitiveStringMap options) {
        return new StructType()
                .add("key", DataTypes.BinaryType)
                .add("value", DataTypes.BinaryType)
                .add("partition", DataTypes.IntegerType);
    }

    @Override
    public Table getTable(StructType schema, Transform[] partitioning, Map<String, String> properties) {
        return new SinkTable(schema);
    }

    static String required(Map<String, String> options, String name) {
        String v = options.get(name);
        if (v == null || v.isEmpty()) {
            throw new IllegalArgumentException(SHORT_NAME + ": option '" + name + "' is required");
        }
        return v;
    }

    /** Consumer settings a Kafka source's options carry that a producer does not know. */
    static final Set<String> CONSUMER_ONLY = Set.of("isolation.level", "group.id", "auto.offset.reset",
            "enable.auto.commit", "max.poll.records", "fetch.min.bytes", "fetch.max.wait.ms", "fetch.max.bytes",
            "max.partition.fetch.bytes", "session.timeout.ms", "heartbeat.interval.ms", "max.poll.interval.ms");
    /** Producer settings a consumer does not know (left out of the ledger's consumer). */
    static final Set<String> PRODUCER_ONLY = Set.of("transaction.timeout.ms", "acks", "enable.idempotence",
            "linger.ms", "batch.size", "compression.type", "buffer.memory", "max.in.flight.requests.per.connection",
            "delivery.timeout.ms", "max.block.ms", "retries", "transactional.id", "partitioner.class");

    /** The producer settings: every kafka.* option without its prefix (consumer-only ones left
     * out), transactions that outlive a driver restart. */
    static Properties producerConfig(Map<String, String> options) {
        Properties p = new Properties();
        p.setProperty("transaction.timeout.ms", "900000"); // the broker's default transaction.max.timeout.ms
        // A batch's tasks start right after the driver committed the last one's transactions on the
        // same ids; while the coordinator still writes those commit markers, initTransactions is
        // answered CONCURRENT_TRANSACTIONS and retried after retry.backoff.ms (100 by default).
        p.setProperty("retry.backoff.ms", "10");
        for (Map.Entry<String, String> e : options.entrySet()) {
            if (e.getKey().startsWith("kafka.") && !CONSUMER_ONLY.contains(e.getKey().substring("kafka.".length()))) {
                p.setProperty(e.getKey().substring("kafka.".length()), e.getValue());
            }
        }
        required(options, "kafka.bootstrap.servers");
        return p;
    }

    private static final class SinkTable implements SupportsWrite {
        private final StructType schema;

        SinkTable(StructType schema) {
            this.schema = schema;
        }

        @Override
        public String name() {
            return SHORT_NAME;
        }

        @Override
        public StructType schema() {
            return schema;
        }

        @Override
        public Set<TableCapability> capabilities() {
            return EnumSet.of(TableCapability.STREAMING_WRITE);
        }

        @Override
        public WriteBuilder newWriteBuilder(LogicalWriteInfo info) {
            return new Builder(info);
        }
    }

    /** Append, update and complete output modes, as Spark's Kafka sink: each micro-batch's rows are
     * appended to the topic (SupportsTruncate: complete mode appends the whole result; a topic is
     * never truncated). */
    private static final class Builder implements SupportsTruncate, SupportsStreamingUpdateAsAppend {
        private final LogicalWriteInfo info;

        Builder(LogicalWriteInfo info) {
            this.info = info;
        }

        @Override
        public WriteBuilder truncate() {
            return this;
        }

        @Override
        public Write build() {
            return new Write() {
                @Override
                public StreamingWrite toStreaming() {
                    HashMap<String, String> options = new HashMap<>(info.options().asCaseSensitiveMap());
                    options.put("queryId", info.queryId());
                    return new EosStreamingWrite(options, info.schema());
                }
            };
        }
    }

    /** Where each Kafka field is in the written rows (-1: absent). */
    static final class Layout implements Serializable {
        private static final long serialVersionUID = 1L;
        final String topic;
        final int key;
        final int value;
        final int partition;
        final int headers;
        final DataType keyType;
        final DataType valueType;

        Layout(String topic, StructType schema) {
            this.topic = topic;
            this.key = index(schema, "key");
            this.value = index(schema, "value");
            this.partition = index(schema, "partition");
            this.headers = index(schema, "headers");
            if (value < 0) {
                throw new IllegalArgumentException(SHORT_NAME + ": the rows need a 'value' column, got " + schema.simpleString());
            }
            this.keyType = key < 0 ? DataTypes.BinaryType : schema.fields()[key].dataType();
            this.valueType = schema.fields()[value].dataType();
        }

        private static int index(StructType schema, String name) {
            StructField[] fields = schema.fields();
            for (int i = 0; i < fields.length; i++) {
                if (fields[i].name().equalsIgnoreCase(name)) {
                    return i;
                }
            }
            return -1;
        }
    }

    /** One committer per (committer class, transactional.id prefix, query id) in this JVM. */
    private static final Map<String, EosCommitter> COMMITTERS = new HashMap<>();

    /** The query run's committer: the one kept for its key while reusable, else a new one, opened
     * (which fences the driver producer of any other committer of the prefix, in any JVM: its next
     * ledger record fails). */
    static synchronized EosCommitter committer(Map<String, String> options) {
        String prefix = required(options, "transactional.id.prefix");
        String cls = options.getOrDefault("committer", LedgerCommitter.class.getName());
        String key = cls + "\0" + prefix + "\0" + options.getOrDefault("queryId", "");
        EosCommitter kept = COMMITTERS.get(key);
        if (kept != null && kept.reusable()) {
            return kept;
        }
        if (kept != null) {
            kept.close();
        }
        EosCommitter fresh;
        try {
            fresh = (EosCommitter) Class.forName(cls).getDeclaredConstructor().newInstance();
        } catch (ReflectiveOperationException e) {
            throw new IllegalArgumentException(SHORT_NAME + ": option 'committer': cannot create " + cls, e);
        }
        try {
            fresh.open(options); // before any task of this run: roll forward, abort leftovers
        } catch (RuntimeException | Error e) {
            fresh.close();
            COMMITTERS.remove(key);
            throw e;
        }
        COMMITTERS.put(key, fresh);
        return fresh;
    }

    static final class EosStreamingWrite implements StreamingWrite {
        private final HashMap<String, String> options;
        private final Layout layout;
        private final EosCommitter committer;
        private final long skipBatch;

        EosStreamingWrite(HashMap<String, String> options, StructType schema) {
            this.options = options;
            this.layout = new Layout(required(options, "topic"), schema);
            this.committer = committer(options);
            this.skipBatch = committer.beforeBatch();
        }

        @Override
        public StreamingDataWriterFactory createStreamingWriterFactory(PhysicalWriteInfo info) {
            committer.beforeTasks(info.numPartitions());
            return new Factory(options, layout, skipBatch);
        }

        @Override
        public boolean useCommitCoordinator() {
            return true; // one attempt per partition may commit: the driver gets one message per partition
        }

        @Override
        public void commit(long epochId, WriterCommitMessage[] messages) {
            committer.commit(epochId, cast(messages));
        }

        @Override
        public void abort(long epochId, WriterCommitMessage[] messages) {
            committer.abort(epochId, cast(messages));
        }

        private static TxnCommit[] cast(WriterCommitMessage[] messages) {
            TxnCommit[] out = new TxnCommit[messages.length];
            for (int i = 0; i < messages.length; i++) {
                out[i] = (TxnCommit) messages[i]; // null where a task did not report (abort)
            }
            return out;
        }
    }

    static final class Factory implements StreamingDataWriterFactory {
        private static final long serialVersionUID = 1L;
        private final HashMap<String, String> options;
        private final Layout layout;
        private final long skipBatch;

        Factory(HashMap<String, String> options, Layout layout, long skipBatch) {
            this.options = options;
            this.layout = layout;
            this.skipBatch = skipBatch;
        }

        @Override
        public DataWriter<InternalRow> createWriter(int partitionId, long taskId, long epochId) {
            return new EosDataWriter(layout, producerConfig(options), options.get("transactional.id.prefix"),
                    partitionId, taskId, epochId == skipBatch);
        }
    }
}
