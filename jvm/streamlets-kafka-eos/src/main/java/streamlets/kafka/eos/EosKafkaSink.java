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
 * <p>Options: kafka.bootstrap.servers, topic, transactional.id.prefix, ledger (a local folder,
 * LedgerCommitter's), committer (class name, optional), kafka.* (producer settings).
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

    /** The producer settings: every kafka.* option without its prefix, transactions that outlive a driver restart. */
    static Properties producerConfig(Map<String, String> options) {
        Properties p = new Properties();
        p.setProperty("transaction.timeout.ms", "900000"); // the broker's default transaction.max.timeout.ms
        for (Map.Entry<String, String> e : options.entrySet()) {
            if (e.getKey().startsWith("kafka.")) {
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
            return new WriteBuilder() {
                @Override
                public Write build() {
                    return new Write() {
                        @Override
                        public StreamingWrite toStreaming() {
                            return new EosStreamingWrite(new HashMap<>(info.options().asCaseSensitiveMap()), info.schema());
                        }
                    };
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

    static final class EosStreamingWrite implements StreamingWrite {
        private final HashMap<String, String> options;
        private final Layout layout;
        private final EosCommitter committer;

        EosStreamingWrite(HashMap<String, String> options, StructType schema) {
            this.options = options;
            this.layout = new Layout(required(options, "topic"), schema);
            required(options, "transactional.id.prefix");
            String cls = options.getOrDefault("committer", LedgerCommitter.class.getName());
            try {
                committer = (EosCommitter) Class.forName(cls).getDeclaredConstructor().newInstance();
            } catch (ReflectiveOperationException e) {
                throw new IllegalArgumentException(SHORT_NAME + ": option 'committer': cannot create " + cls, e);
            }
            committer.open(options); // before any task of this run: roll forward, abort leftovers
        }

        @Override
        public StreamingDataWriterFactory createStreamingWriterFactory(PhysicalWriteInfo info) {
            committer.beforeTasks(info.numPartitions());
            return new Factory(options, layout, committer.lastCommitted());
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
        private final long lastCommitted;

        Factory(HashMap<String, String> options, Layout layout, long lastCommitted) {
            this.options = options;
            this.layout = layout;
            this.lastCommitted = lastCommitted;
        }

        @Override
        public DataWriter<InternalRow> createWriter(int partitionId, long taskId, long epochId) {
            return new EosDataWriter(layout, producerConfig(options), options.get("transactional.id.prefix"),
                    partitionId, taskId, epochId <= lastCommitted);
        }
    }
}
