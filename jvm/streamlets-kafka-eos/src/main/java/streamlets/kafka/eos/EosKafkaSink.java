package streamlets.kafka.eos;

import java.io.Serializable;
import java.util.EnumSet;
import java.util.HashMap;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;

import org.apache.spark.SparkContext;
import org.apache.spark.scheduler.SparkListener;
import org.apache.spark.scheduler.SparkListenerEvent;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.streaming.StreamingQueryListener;
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
    private static final org.slf4j.Logger LOG = org.slf4j.LoggerFactory.getLogger("streamlets.kafka.eos");

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

    /** The producer settings of the tasks and the driver: the sink's own (transactions that
     * outlive a driver restart, a short retry.backoff.ms, linger.ms 5 and 64 KiB batches), then
     * every kafka.* option without its prefix (consumer-only ones left out), which overrides them. */
    static Properties producerConfig(Map<String, String> options) {
        Properties p = new Properties();
        p.setProperty("transaction.timeout.ms", "900000"); // the broker's default transaction.max.timeout.ms
        // A transaction that begins right after the last one of its id was committed (the ledger's
        // "committed" record after its "decided" one; a batch's tasks after the driver committed the
        // last batch's transactions) is answered CONCURRENT_TRANSACTIONS while the coordinator still
        // writes the commit markers: initTransactions and AddPartitionsToTxn are retried after
        // retry.backoff.ms (100 by default; at most 20 for AddPartitionsToTxn), growing to
        // retry.backoff.max.ms (KIP-580). What each setting costs back to back: bench/README.md,
        // bench_txn_backoff.py.
        p.setProperty("retry.backoff.ms", "1");
        // Fuller produce requests: a task's records become visible only when the driver commits its
        // transaction, after the task's flush() has sent every batch at once, so waiting up to 5 ms
        // for a batch to fill (linger.ms 5: kafka-clients 4.0's default, KIP-1030; 0 in the 3.9
        // clients Spark ships) and 64 KiB batches (16 KiB by default) delay no record's visibility
        // and cut the producer's and the broker's work per record (bench/README.md, bench_map).
        // kafka.linger.ms and kafka.batch.size options override them.
        p.setProperty("linger.ms", "5");
        p.setProperty("batch.size", "65536");
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
    private static final Map<String, EosCommitter> COMMITTERS = new ConcurrentHashMap<>();
    /** How many committers of each transactional.id prefix began to open in this JVM. */
    private static final Map<String, Long> OPENS = new ConcurrentHashMap<>();
    /** Each committer's number among its prefix's OPENS. */
    private static final Map<EosCommitter, Long> GENERATIONS = java.util.Collections.synchronizedMap(new java.util.WeakHashMap<>());
    /** The run id each committer serves (the job group Spark's stream thread sets: its run id). */
    private static final Map<String, String> RUNS = new ConcurrentHashMap<>();
    private static volatile boolean watching;
    /** A lock per such key: a committer opens under its key's lock only. */
    private static final Map<String, Object> LOCKS = new ConcurrentHashMap<>();
    /** Committers opened ahead of their query by {@link #prepare}, per (committer class, prefix). */
    private static final Map<String, Prepared> PREPARED = new ConcurrentHashMap<>();

    private record Prepared(Map<String, String> options, CompletableFuture<EosCommitter> committer) {
        /** Close it once open (it was not taken). */
        void discard() {
            committer.thenAccept(EosCommitter::close);
        }
    }

    /**
     * Open the committer of an outlet query about to start, in the background: the Python runtime
     * calls this (streamlets.runtime.exactly_once) just before DataStreamWriter.start(), so the
     * committer's start (its driver producer's initTransactions, reading the ledger, fencing the
     * ids an earlier run used) overlaps Spark's start of the query instead of delaying its first
     * batch. The query's first StreamingWrite takes it when its options are these (plus Spark's
     * query id); a failed open is done again there, which reports its error.
     */
    public static void prepare(Map<String, String> options) {
        Map<String, String> copy = Map.copyOf(options);
        String cls = committerClass(copy);
        String prefix = required(copy, "transactional.id.prefix");
        CompletableFuture<EosCommitter> opening = new CompletableFuture<>();
        Thread t = new Thread(() -> {
            try {
                opening.complete(opened(cls, copy));
            } catch (RuntimeException | Error e) {
                opening.completeExceptionally(e);
            }
        }, "streamlets-kafka-eos open " + prefix);
        t.setDaemon(true);
        Prepared old = PREPARED.put(preparedKey(cls, prefix), new Prepared(copy, opening));
        if (old != null) {
            old.discard();
        }
        t.start();
    }

    /**
     * Close the committer {@link #prepare} opened for exactly these options, unless a query took it:
     * the Python runtime calls this when the query it was prepared for fails to start, so that no
     * driver producer stays open for it. One prepared for other options (a newer prepare of the
     * prefix) is kept.
     */
    public static void discardPrepared(Map<String, String> options) {
        Map<String, String> copy = Map.copyOf(options);
        PREPARED.computeIfPresent(preparedKey(committerClass(copy), required(copy, "transactional.id.prefix")),
                (key, prepared) -> {
                    if (!prepared.options().equals(copy)) {
                        return prepared;
                    }
                    prepared.discard();
                    return null;
                });
    }

    /** Option "committer": the EosCommitter class (LedgerCommitter by default). */
    private static String committerClass(Map<String, String> options) {
        return options.getOrDefault("committer", LedgerCommitter.class.getName());
    }

    private static String preparedKey(String cls, String prefix) {
        return cls + "\0" + prefix;
    }

    private static Object lock(String key) {
        return LOCKS.computeIfAbsent(key, k -> new Object());
    }

    /** Whether a query's write options (`asked`) carry the settings a committer was prepared with:
     * every prepared option, and no other producer setting (kafka.*); the others are Spark's own
     * (queryId, checkpointLocation, ...). */
    static boolean sameSettings(Map<String, String> prepared, Map<String, String> asked) {
        for (Map.Entry<String, String> e : asked.entrySet()) {
            if (e.getKey().startsWith("kafka.") && !prepared.containsKey(e.getKey())) {
                return false;
            }
        }
        for (Map.Entry<String, String> e : prepared.entrySet()) {
            if (!e.getValue().equals(asked.get(e.getKey()))) {
                return false;
            }
        }
        return true;
    }

    /** A new committer of class `cls`, opened (closed again when open fails). */
    private static EosCommitter opened(String cls, Map<String, String> options) {
        long generation = OPENS.merge(required(options, "transactional.id.prefix"), 1L, Long::sum);
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
            throw e;
        }
        GENERATIONS.put(fresh, generation);
        return fresh;
    }

    /** committer.committed() while it is the last committer of its prefix to open in this JVM; empty
     * once another one began to open (its open fences every task producer of the prefix, so none
     * may be continued). */
    static Map<String, String> committedBy(EosCommitter committer, String prefix) {
        Long generation = GENERATIONS.get(committer);
        return generation != null && generation.equals(OPENS.get(prefix)) ? committer.committed() : Map.of();
    }

    /** The query run's committer: at a run's first batch, the one {@link #prepare} opened for these
     * options (it fenced every other committer of the prefix, so a kept one is closed); else the one
     * kept for its key while reusable, else a new one, opened (which fences the driver producer of any other
     * committer of the prefix, in any JVM: its next ledger record fails). */
    static EosCommitter committer(Map<String, String> options) {
        String prefix = required(options, "transactional.id.prefix");
        String cls = committerClass(options);
        String key = cls + "\0" + prefix + "\0" + options.getOrDefault("queryId", "");
        // Spark's stream thread runs each batch in the job group of its run id (StreamExecution)
        String local = SparkContext.getOrCreate().getLocalProperty("spark.jobGroup.id");
        String run = local == null ? "" : local;
        synchronized (lock(key)) {
            EosCommitter kept = COMMITTERS.get(key);
            // a run's first batch takes the committer prepared for it; a later one keeps its own (a
            // newer query of the prefix prepared that one: it fences this run, which then fails)
            EosCommitter fresh = kept != null && run.equals(RUNS.get(key)) ? null : takePrepared(cls, prefix, options);
            if (fresh == null && kept != null && kept.reusable()) {
                RUNS.put(key, run);
                return kept;
            }
            if (kept != null) {
                COMMITTERS.remove(key);
                kept.close();
            }
            if (fresh == null) {
                fresh = opened(cls, options);
            }
            COMMITTERS.put(key, fresh);
            RUNS.put(key, run);
            watchTerminations();
            return fresh;
        }
    }

    /** The committer {@link #prepare} opened for these options, or null (none, other options, or
     * its open failed: opening again reports the error). */
    private static EosCommitter takePrepared(String cls, String prefix, Map<String, String> options) {
        Prepared prepared = PREPARED.remove(preparedKey(cls, prefix));
        if (prepared == null) {
            return null;
        }
        if (!sameSettings(prepared.options(), options)) {
            java.util.Set<String> differ = new java.util.TreeSet<>(prepared.options().keySet());
            differ.addAll(options.keySet());
            differ.removeIf(k -> java.util.Objects.equals(prepared.options().get(k), options.get(k)));
            LOG.info("{}: the committer prepared for other settings ({}) is not used", prefix, differ);
            prepared.discard();
            return null;
        }
        try {
            return prepared.committer().join();
        } catch (java.util.concurrent.CompletionException e) {
            return null;
        }
    }

    /** Close the committers of a query run once Spark reports it terminated (its
     * QueryTerminatedEvent reaches SparkListeners through the listener bus), so that stopped
     * queries leave no producers in the driver. */
    private static synchronized void watchTerminations() {
        if (watching) {
            return;
        }
        SparkContext.getOrCreate().addSparkListener(new SparkListener() {
            @Override
            public void onOtherEvent(SparkListenerEvent event) {
                if (event instanceof StreamingQueryListener.QueryTerminatedEvent terminated) {
                    String run = terminated.runId().toString();
                    for (Map.Entry<String, String> e : RUNS.entrySet()) {
                        if (e.getValue().equals(run)) {
                            synchronized (lock(e.getKey())) {
                                if (RUNS.remove(e.getKey(), run)) {
                                    EosCommitter c = COMMITTERS.remove(e.getKey());
                                    if (c != null) {
                                        c.close();
                                    }
                                }
                            }
                        }
                    }
                }
            }
        });
        watching = true;
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
            return new Factory(options, layout, skipBatch,
                    new HashMap<>(committedBy(committer, options.get("transactional.id.prefix"))));
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
        private final HashMap<String, String> committed;

        Factory(HashMap<String, String> options, Layout layout, long skipBatch, HashMap<String, String> committed) {
            this.options = options;
            this.layout = layout;
            this.skipBatch = skipBatch;
            this.committed = committed;
        }

        @Override
        public DataWriter<InternalRow> createWriter(int partitionId, long taskId, long epochId) {
            return new EosDataWriter(layout, producerConfig(options), options.get("transactional.id.prefix"),
                    partitionId, taskId, epochId == skipBatch, committed);
        }
    }
}
