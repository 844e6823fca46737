package streamlets.kafka.eos;

import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import org.apache.hadoop.fs.FSDataInputStream;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.DescribeTransactionsResult;
import org.apache.kafka.clients.admin.TransactionDescription;
import org.apache.kafka.clients.admin.TransactionState;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.InvalidProducerEpochException;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.spark.SparkContext;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The default driver committer. Its ledger is a Kafka topic (option "ledger.topic": the
 * application's {@code <app>.outlet-batches}, streamlets.runtime.system_topics; partition 0,
 * compacted), one record per state change keyed by the transactional.id prefix, the last one
 * being the outlet query's state, each in a transaction of the driver's producer (transactional.id
 * = the prefix: a newer driver fences an older one). Its value is JSON:
 * <pre>{"batch": b, "fingerprint": f, "state": "decided" | "committed" | "aborted" | "none",
 *  "ids": n, "transactions": ["&lt;TxnCommit line&gt;", ...]}</pre>
 * <ul>
 *   <li>"decided": the tasks' transactions of batch b, produced (acks=all) BEFORE any is
 *       committed: the commit decision;</li>
 *   <li>"committed": every transaction of that decision committed;</li>
 *   <li>"aborted": the broker had aborted all of them (transaction.timeout.ms), or some, none
 *       being committed (a restart that slow: the others are aborted too): the batch is written
 *       again;</li>
 *   <li>ids: how many transactional ids (prefix-0 .. prefix-(n-1)) were ever used.</li>
 * </ul>
 * The fingerprint is sha256 (16 hex digits) of the query checkpoint's offset-log entry
 * {@code <checkpoint>/offsets/<b>} (option "checkpoint", read through Hadoop's FileSystem): the
 * batch Spark planned. A replayed batch is skipped only when both its id and its fingerprint are
 * the last committed ones; a fresh checkpoint, or one restored from a savepoint, plans new
 * entries whose fingerprints differ even where batch ids repeat.
 *
 * <p>open(): a decision without an outcome is rolled forward (resume + commit each; a commit
 * already done is accepted again), unless the coordinators say that some of its transactions can
 * no longer be committed and none was (then it is written off as "aborted"); then every id ever
 * used is fenced by initTransactions, which aborts leftovers (transactions of tasks whose batch
 * had no decision).
 */
public class LedgerCommitter implements EosCommitter {
    private static final Logger LOG = LoggerFactory.getLogger("streamlets.kafka.eos");
    private static final ObjectMapper JSON = new ObjectMapper();
    /** How long the ledger is read to its end, and a ledger record's send waits. */
    static final Duration LEDGER_TIMEOUT = Duration.ofSeconds(120);

    private Properties producerConfig;
    private String prefix;
    private String ledgerTopic;
    private String checkpoint;
    private ResumableProducer ledger;
    private ExecutorService committing;
    /** A producer per task transactional id, kept to resume and end its transactions batch after batch. */
    private final Map<String, ResumableProducer> enders = new ConcurrentHashMap<>();
    private volatile Map<String, String> committed = Map.of(); // committed(): the last batch's tokens
    private volatile ObjectNode state; // the last ledger record of this prefix
    private volatile boolean failed;   // a call failed: Spark's next batch gets a new committer
    /** The last batch's "committed" record, written by the recorder thread while Spark writes its
     * commit log and plans the next batch; every other use of the ledger, the state or the tokens
     * waits for it first ({@link #settled()}). */
    private volatile Future<?> recording;
    private ExecutorService recorder;
    /** How long close() waits for a "committed" record being written (then the next run rolls the
     * decision forward). */
    static final Duration CLOSE_WAIT = Duration.ofSeconds(10);
    /** System.nanoTime() when the last batch's tasks were about to start (beforeTasks): every
     * transaction of its tasks began after it. */
    private volatile long tasksStarted;
    /** The batch the last commit() was for (or the ledger's last batch after open()): the next batch
     * is most likely the one after it. */
    private volatile long lastBatch = -1;
    /** The fingerprint of batch {@link #earlyBatch}, computed while its tasks run (beforeTasks):
     * off the path from the tasks' end to the batch's records becoming visible. */
    private volatile Future<String> early;
    private volatile long earlyBatch = -1;
    /** System.nanoTime() when the ledger producer's open transaction was begun ahead of the next
     * record (beforeTasks: its partition added while the tasks run), 0 when none is. */
    private volatile long begunAhead;
    /** The batch this committer last committed, and the query run (Spark's job group on the stream
     * thread) it did so in: planning the next batch of that run needs no fingerprint read. */
    private volatile long committedBatch = -1;
    private volatile String committedRun;
    /** Why the last decision rolled forward was written off instead (rollForward), for Tool open; null
     * when none was. */
    volatile String writtenOff;

    @Override
    public void open(Map<String, String> options) {
        producerConfig = EosKafkaSink.producerConfig(options);
        prefix = EosKafkaSink.required(options, "transactional.id.prefix");
        ledgerTopic = EosKafkaSink.required(options, "ledger.topic");
        checkpoint = options.get("checkpoint");
        // The driver's own transactional id (the prefix): its initTransactions fences an earlier
        // driver of this outlet query (a zombie), whose next ledger record then fails, so it can
        // never decide or commit a batch again.
        ledger = new ResumableProducer(producerConfig, prefix);
        ledger.initTransactions();
        state = readLedger();
        rollForward();
        int ids = state.path("ids").asInt(0);
        List<String> leftovers = new ArrayList<>();
        for (int i = 0; i < ids; i++) {
            leftovers.add(prefix + "-" + i);
        }
        // abort leftovers: initTransactions fences and aborts; the producers then end the tasks' transactions
        all("fencing " + prefix, leftovers, id -> {
            ResumableProducer p = new ResumableProducer(producerConfig, id);
            try {
                p.initTransactions();
            } catch (RuntimeException e) {
                p.close(Duration.ZERO);
                throw e;
            }
            ResumableProducer old = enders.put(id, p);
            if (old != null) {
                old.close(Duration.ZERO);
            }
            return null;
        });
        committed = Map.of(); // every id fenced: no task producer of an earlier run goes on
        lastBatch = state.path("batch").asLong(-1);
        LOG.info("{} -> {}: last ledger state {} of batch {}", prefix, options.get("topic"), text(state, "state"),
                state.path("batch").asLong(-1));
    }

    /** A decision without an outcome (recorded by an earlier run, or by this committer before a
     * failure) is committed now; or, when the coordinators say that the broker already aborted some
     * of its transactions (transaction.timeout.ms passed: a restart that slow) or would abort one
     * before long, and that none was committed yet, every other one is aborted too and the batch
     * recorded "aborted": written again, whole, rather than partly committed and partly lost. */
    private void rollForward() {
        if (!"decided".equals(text(state, "state"))) {
            return;
        }
        long batch = state.path("batch").asLong();
        String fingerprint = text(state, "fingerprint");
        List<TxnCommit> decision = new ArrayList<>();
        for (JsonNode line : state.path("transactions")) {
            decision.add(TxnCommit.fromLine(line.asText()));
        }
        Outcome outcome = outcome(decision);
        if (!outcome.uncommittable.isEmpty() && outcome.committed == 0 && outcome.undescribed == 0) {
            writtenOff = String.join("; ", outcome.uncommittable.values());
            LOG.warn("{}: batch {} is written again, not rolled forward: its transactions {} can no longer be "
                    + "committed ({}) and none of its {} was", prefix, batch, outcome.uncommittable.keySet(),
                    writtenOff, decision.size());
            for (TxnCommit m : decision) {
                if (!outcome.uncommittable.containsKey(m.transactionalId)) {
                    try {
                        end(m, false);
                    } catch (KafkaException e) { // fenced already: aborted by the broker meanwhile
                        LOG.info("{}: abort {}: {}", prefix, m.transactionalId, e.toString());
                    }
                }
            }
            record(entry(batch, fingerprint, "aborted", decision));
            return;
        }
        LOG.info("{}: rolling batch {} forward ({} transactions)", prefix, batch, decision.size());
        commitAll(batch, fingerprint, decision);
        record(entry(batch, fingerprint, "committed", decision));
    }

    /** What the transaction coordinators say of a decision's transactions: `committed`, how many
     * were committed already (PrepareCommit or CompleteCommit under the decision's producer id and
     * epoch); `uncommittable`, id -> why, those the broker aborted (under the decision's producer id:
     * PrepareAbort, CompleteAbort, PrepareEpochFence, or a newer epoch: transaction.timeout.ms
     * passed, or a fence) or will abort
     * within commitMarginMs of their transaction.timeout.ms (Ongoing, by this machine's clock against
     * the coordinator's start time); `undescribed`, how many the coordinators could not describe
     * (then the decision is rolled forward as before: the commits report what is wrong). */
    private record Outcome(int committed, Map<String, String> uncommittable, int undescribed) {
    }

    private Outcome outcome(List<TxnCommit> decision) {
        int done = 0;
        Map<String, String> uncommittable = new TreeMap<>();
        int undescribed = 0;
        List<String> ids = decision.stream().map(m -> m.transactionalId).toList();
        try (Admin admin = Admin.create(adminConfig())) {
            DescribeTransactionsResult described = admin.describeTransactions(ids);
            long now = System.currentTimeMillis();
            for (TxnCommit m : decision) {
                TransactionDescription d;
                try {
                    d = described.description(m.transactionalId).get(LEDGER_TIMEOUT.toMillis(), TimeUnit.MILLISECONDS);
                } catch (ExecutionException | java.util.concurrent.TimeoutException e) {
                    LOG.info("{}: transaction {} not described: {}", prefix, m.transactionalId, e.toString());
                    undescribed++;
                    continue;
                }
                boolean same = d.producerId() == m.producerId && d.producerEpoch() == m.epoch;
                TransactionState st = d.state();
                if (same && (st == TransactionState.PREPARE_COMMIT || st == TransactionState.COMPLETE_COMMIT)) {
                    done++;
                } else if (d.producerId() == m.producerId && (d.producerEpoch() > m.epoch
                        || st == TransactionState.PREPARE_ABORT || st == TransactionState.COMPLETE_ABORT
                        || st == TransactionState.PREPARE_EPOCH_FENCE)) {
                    uncommittable.put(m.transactionalId, m.transactionalId + " " + st + " at epoch " + d.producerEpoch());
                } else if (same && st == TransactionState.ONGOING && d.transactionStartTimeMs().isPresent()) {
                    long left = d.transactionStartTimeMs().getAsLong() + d.transactionTimeoutMs() - now;
                    if (left < commitMarginMs(d.transactionTimeoutMs())) {
                        uncommittable.put(m.transactionalId, m.transactionalId + " Ongoing, " + left
                                + " ms before its transaction.timeout.ms");
                    }
                }
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new KafkaException(prefix + ": interrupted while its transactions were described", e);
        }
        return new Outcome(done, uncommittable, undescribed);
    }

    @Override
    public long beforeBatch() {
        return guarded(() -> {
            settled();
            rollForward();
            long batch = state.path("batch").asLong(-1);
            if (batch >= 0 && "committed".equals(text(state, "state"))
                    && (batch == committedBatch && currentRun().equals(committedRun) // its offsets/ entry, as decided
                        || fingerprint(batch).equals(text(state, "fingerprint")))) {
                return batch;
            }
            return -1L;
        });
    }

    @Override
    public boolean reusable() {
        try {
            settled();
        } catch (RuntimeException e) { // failed: the next batch opens a new committer, which rolls forward
            LOG.warn("{}: the last batch's ledger record: {}", prefix, e.toString());
        }
        return !failed;
    }

    /** Wait for the "committed" record being written, if any. Its failure marks this committer
     * failed (a new one rolls the decision forward) and is thrown. */
    private void settled() {
        Future<?> pending = recording;
        if (pending == null) {
            return;
        }
        recording = null;
        try {
            pending.get();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            failed = true;
            committed = Map.of();
            throw new KafkaException(prefix + ": interrupted while the batch ledger was written", e);
        } catch (ExecutionException e) {
            failed = true;
            committed = Map.of();
            throw e.getCause() instanceof RuntimeException r ? r : new KafkaException(e.getCause());
        }
    }

    @Override
    public void close() {
        Future<?> pending = recording;
        if (pending != null) { // a stopping query: leave its last batch recorded as committed
            try {
                pending.get(CLOSE_WAIT.toMillis(), java.util.concurrent.TimeUnit.MILLISECONDS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            } catch (ExecutionException | java.util.concurrent.TimeoutException e) {
                LOG.info("{}: the last batch's committed record was not written ({}); the next run rolls "
                        + "its decision forward", prefix, e.toString());
            }
        }
        failed = true;
        committed = Map.of();
        if (recorder != null) {
            recorder.shutdownNow();
        }
        if (ledger != null) {
            try {
                abortAhead(); // holds no record; else the coordinator would keep it until transaction.timeout.ms
            } catch (RuntimeException e) {
                LOG.debug("{}: the ledger's transaction begun ahead: {}", prefix, e.toString());
            }
            ledger.close(Duration.ZERO);
        }
        for (ResumableProducer p : enders.values()) {
            p.close(Duration.ZERO);
        }
        enders.clear();
        if (committing != null) {
            committing.shutdownNow();
        }
    }

    /** `call()`, marking this committer failed when it throws. */
    private <T> T guarded(java.util.function.Supplier<T> call) {
        try {
            return call.get();
        } catch (RuntimeException | Error e) {
            failed = true;
            committed = Map.of();
            throw e;
        }
    }

    @Override
    public void beforeTasks(int numPartitions) {
        guarded(() -> {
            settled(); // the last batch's tokens are handed to the tasks only once its record is durable
            return null;
        });
        tasksStarted = System.nanoTime();
        long upcoming = lastBatch + 1;
        if (upcoming > 0 && checkpoint != null && !checkpoint.isEmpty()) { // Spark wrote its offsets/ entry before planning it
            earlyBatch = upcoming;
            early = pool().submit(() -> fingerprint(upcoming));
        }
        if (numPartitions > state.path("ids").asInt(0)) {
            ObjectNode next = state.deepCopy();
            next.put("ids", numPartitions);
            guarded(() -> {
                record(next);
                return null;
            });
        }
        guarded(() -> {
            beginAhead();
            return null;
        });
    }

    /** Begin the decision's transaction while the tasks run, the ledger partition added to it (the
     * AddPartitionsToTxn round trip off the path from the tasks' end to the batch's records becoming
     * visible). Partition 0's leader learns of the transaction only when the decision is sent, so
     * other outlets' reads of the ledger are not held back meanwhile. It lives as long as the
     * batch's tasks: the decision uses it, or commit() with nothing to decide, abort() and close()
     * abort it; so refuseNearTimeout keeps it far from transaction.timeout.ms, where the coordinator
     * would abort it and fence this producer. One still open from a batch that was neither
     * committed nor aborted is kept while younger than commitMarginMs, else aborted first. */
    private void beginAhead() {
        long since = begunAhead;
        if (since != 0 && (System.nanoTime() - since) / 1_000_000 < commitMarginMs(transactionTimeoutMs())) {
            return;
        }
        abortAhead();
        ledger.beginTransaction();
        begunAhead = System.nanoTime();
        ledger.addPartitionNow(new TopicPartition(ledgerTopic, 0));
    }

    /** Abort the transaction begun ahead, if any (it holds no record). */
    private void abortAhead() {
        if (begunAhead != 0) {
            begunAhead = 0;
            ledger.abortTransaction();
        }
    }

    /** The query run whose stream thread calls (Spark sets its run id as the thread's job group,
     * StreamExecution.runStream), "" elsewhere. */
    private static String currentRun() {
        String group = SparkContext.getOrCreate().getLocalProperty("spark.jobGroup.id");
        return group == null ? "" : group;
    }

    private long transactionTimeoutMs() {
        return Long.parseLong(producerConfig.getProperty("transaction.timeout.ms", "60000"));
    }

    @Override
    public void commit(long batchId, TxnCommit[] messages) {
        guarded(() -> {
            decide(batchId, messages);
            return null;
        });
    }

    private void decide(long batchId, TxnCommit[] messages) {
        settled();
        lastBatch = batchId;
        List<TxnCommit> decision = new ArrayList<>();
        for (TxnCommit m : messages) {
            if (m != null && m.transactionalId != null) {
                decision.add(m);
            }
        }
        if (decision.isEmpty()) {
            committed = tokens(messages); // no task wrote: nothing to decide or commit
            try {
                abortAhead(); // never left open while no batch runs: at transaction.timeout.ms it would fence this producer
            } catch (KafkaException e) { // the next batch opens a new committer (reusable() is false)
                LOG.info("{}: batch {}: the ledger's transaction begun ahead: {}", prefix, batchId, e.toString());
                failed = true;
            }
            return;
        }
        long start = System.nanoTime();
        refuseNearTimeout(batchId);
        String fingerprint = fingerprintOf(batchId);
        record(entry(batchId, fingerprint, "decided", decision)); // the decision, durable first
        long decidedAt = System.nanoTime();
        decided(batchId, decision);
        commitAll(batchId, fingerprint, decision);
        committedBatch = batchId;
        committedRun = currentRun();
        long decideMs = (decidedAt - start) / 1_000_000;
        long commitMs = (System.nanoTime() - decidedAt) / 1_000_000;
        // The batch is committed (its records visible): Spark may write its commit log and plan the
        // next batch while the ledger records it. Its tokens are handed to the next tasks only once
        // that record is durable (settled() in beforeTasks): a task producer continuing before it
        // could have its next, undecided transaction committed by a restart's roll-forward.
        ObjectNode done = entry(batchId, fingerprint, "committed", decision);
        Map<String, String> tokens = tokens(messages);
        Map<String, Long> perExecutor = perExecutor(messages);
        recording = recorder().submit(() -> {
            beforeCommittedRecord(batchId);
            record(done);
            committed = tokens; // durable as committed: the tasks' producers may go on
            LOG.info("{}: batch {} committed, records per executor {}; decided in {} ms, its {} transactions "
                    + "committed in {} ms", prefix, batchId, perExecutor, decideMs, decision.size(), commitMs);
            return null;
        });
    }

    /** How close to transaction.timeout.ms (ms) a batch may come before its commit: its smaller
     * part, up to a minute (90 s of the sink's default 900 s would be 60). */
    static long commitMarginMs(long timeoutMs) {
        return Math.min(60_000L, timeoutMs / 10);
    }

    /** The batch's transactions began after its tasks started (beforeTasks): when that is longer
     * ago than transaction.timeout.ms less commitMarginMs, the broker could abort some of them while
     * the others are committed, and their records would be lost. So the batch is not decided: this
     * throws, Spark's abort() aborts its transactions, the batch fails, and its replay writes it
     * again. */
    private void refuseNearTimeout(long batchId) {
        long started = tasksStarted;
        if (started == 0) {
            return;
        }
        long timeout = transactionTimeoutMs();
        long elapsed = (System.nanoTime() - started) / 1_000_000;
        if (elapsed > timeout - commitMarginMs(timeout)) {
            throw new KafkaException("batch " + batchId + " is not committed: its tasks began " + elapsed
                    + " ms ago, within " + commitMarginMs(timeout) + " ms of transaction.timeout.ms (" + timeout
                    + " ms), when the broker may abort some of its transactions and not others; they are aborted "
                    + "and the batch is written again. Raise kafka.transaction.timeout.ms (up to the broker's "
                    + "transaction.max.timeout.ms) or make batches smaller (maxOffsetsPerTrigger)");
        }
    }

    /** Records per executor id of a batch's commit messages. */
    static Map<String, Long> perExecutor(TxnCommit[] messages) {
        Map<String, Long> out = new TreeMap<>();
        for (TxnCommit m : messages) {
            if (m != null) {
                out.merge(m.executor, m.total(), Long::sum);
            }
        }
        return out;
    }

    /** Called after the decision is durable, before any transaction is committed (tests hook in here). */
    protected void decided(long batchId, List<TxnCommit> decision) {
    }

    /** Called by the recorder thread after the batch's commits, before its "committed" record (tests hook in here). */
    protected void beforeCommittedRecord(long batchId) {
    }

    /** Commit every transaction of the decision (in parallel); records "aborted" and throws when the
     * broker had aborted all of them, throws when it aborted some. The caller records "committed". */
    private void commitAll(long batchId, String fingerprint, List<TxnCommit> decision) {
        committed = Map.of();
        List<String> fenced = new ArrayList<>();
        for (String id : all("batch " + batchId + ": a commit", decision, m -> { // one coordinator round trip each
            try {
                end(m, true);
                return null;
            } catch (ProducerFencedException | InvalidProducerEpochException e) {
                LOG.warn("{}: batch {}: {} was fenced: {}", prefix, batchId, m, e.toString());
                return m.transactionalId;
            }
        })) {
            if (id != null) {
                fenced.add(id);
            }
        }
        if (!fenced.isEmpty() && fenced.size() == decision.size()) {
            record(entry(batchId, fingerprint, "aborted", decision));
            throw new KafkaException("batch " + batchId + ": the broker aborted all its transactions "
                    + "(transaction.timeout.ms passed before the commit); the batch is written again on restart");
        }
        if (!fenced.isEmpty()) {
            throw new KafkaException("batch " + batchId + " partly committed: the broker aborted transactions "
                    + fenced + " (transaction.timeout.ms passed before the commit); their records are lost");
        }
    }

    /** Transactional id -> token of each task's transaction of a batch, those that wrote and those
     * that did not. */
    private Map<String, String> tokens(TxnCommit[] messages) {
        Map<String, String> out = new java.util.HashMap<>();
        for (TxnCommit m : messages) {
            if (m != null && !"-".equals(m.token)) {
                out.put(prefix + "-" + m.sparkPartition, m.token);
            }
        }
        return Map.copyOf(out);
    }

    @Override
    public Map<String, String> committed() {
        return committed;
    }

    /** The producer that resumes and ends transactions of `transactionalId` (one per id, kept). */
    private ResumableProducer ender(String transactionalId) {
        return enders.computeIfAbsent(transactionalId, id -> new ResumableProducer(producerConfig, id));
    }

    /** Resume m's transaction and commit or abort it; a producer that failed is dropped. */
    private void end(TxnCommit m, boolean commit) {
        ResumableProducer p = ender(m.transactionalId);
        try {
            p.resumeTransaction(m.producerId, m.epoch);
            if (commit) {
                p.commitTransaction();
            } else {
                p.abortTransaction();
            }
        } catch (RuntimeException e) {
            enders.remove(m.transactionalId, p);
            p.close(Duration.ZERO);
            throw e;
        }
    }

    /** `call` on each item in parallel (the commit pool), its results in order; the first failure
     * is thrown as a KafkaException naming `what`. */
    private <T, R> List<R> all(String what, List<T> items, java.util.function.Function<T, R> call) {
        List<Future<R>> futures = new ArrayList<>();
        for (T item : items) {
            futures.add(pool().submit(() -> call.apply(item)));
        }
        List<R> out = new ArrayList<>();
        for (Future<R> f : futures) {
            try {
                out.add(f.get());
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new KafkaException(what + ": interrupted", e);
            } catch (ExecutionException e) {
                throw new KafkaException(what + " failed: " + e.getCause(), e.getCause());
            }
        }
        return out;
    }

    @Override
    public void abort(long batchId, TxnCommit[] messages) {
        try {
            settled();
        } catch (RuntimeException e) { // failed already: the next committer rolls the last decision forward
            LOG.info("{}: abort of batch {}: {}", prefix, batchId, e.toString());
        }
        try {
            abortAhead();
        } catch (KafkaException e) { // fenced or failed: the next record's transaction reports it
            LOG.info("{}: abort of batch {}: the ledger's transaction: {}", prefix, batchId, e.toString());
        }
        if ("decided".equals(text(state, "state")) && state.path("batch").asLong(-1) == batchId) {
            return; // decided: rolled forward by the next batch or run, never aborted
        }
        committed = Map.of();
        for (TxnCommit m : messages) {
            if (m == null || m.transactionalId == null) {
                continue;
            }
            try {
                end(m, false);
            } catch (KafkaException e) { // fenced already: a later initTransactions aborted it
                LOG.info("{}: abort {}: {}", prefix, m.transactionalId, e.toString());
            }
        }
    }

    /** The thread that writes "committed" records (one: the ledger producer's transactions are
     * sequential). */
    private synchronized ExecutorService recorder() {
        if (recorder == null) {
            recorder = Executors.newSingleThreadExecutor(r -> {
                Thread t = new Thread(r, "streamlets-kafka-eos ledger " + prefix);
                t.setDaemon(true);
                return t;
            });
        }
        return recorder;
    }

    private synchronized ExecutorService pool() {
        if (committing == null) {
            committing = Executors.newFixedThreadPool(8, r -> {
                Thread t = new Thread(r, "streamlets-kafka-eos commit " + prefix);
                t.setDaemon(true);
                return t;
            });
        }
        return committing;
    }

    // -- the ledger ---------------------------------------------------------------------------

    private ObjectNode entry(long batchId, String fingerprint, String kind, List<TxnCommit> decision) {
        ObjectNode e = JSON.createObjectNode();
        e.put("batch", batchId);
        e.put("fingerprint", fingerprint);
        e.put("state", kind);
        e.put("ids", state.path("ids").asInt(0));
        ArrayNode lines = e.putArray("transactions");
        for (TxnCommit m : decision) {
            lines.add(m.toLine());
        }
        return e;
    }

    private static String text(JsonNode node, String field) {
        return node.path(field).asText("");
    }

    /** Produce the new state in a transaction of the driver's producer (fenced when a newer driver
     * of this outlet query started) and wait for its commit. */
    private void record(ObjectNode next) {
        boolean ahead = begunAhead != 0;
        begunAhead = 0;
        try {
            if (!ahead) {
                ledger.beginTransaction();
            }
            ledger.send(new ProducerRecord<>(ledgerTopic, 0, prefix.getBytes(StandardCharsets.UTF_8),
                    JSON.writeValueAsBytes(next)));
            ledger.commitTransaction();
        } catch (ProducerFencedException | InvalidProducerEpochException e) {
            throw new KafkaException(prefix + ": a newer driver of this outlet query started (fenced): this one "
                    + "stops deciding batches", e);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        } catch (KafkaException e) {
            if (fenced(e)) { // a transaction begun ahead: its AddPartitionsToTxn met the fence, the send reports it
                throw new KafkaException(prefix + ": a newer driver of this outlet query started (fenced): this one "
                        + "stops deciding batches", e);
            }
            try {
                ledger.abortTransaction();
            } catch (KafkaException ignored) { // the next record's transaction reports what is wrong
            }
            throw new KafkaException("writing the batch ledger " + ledgerTopic + " failed: " + e, e);
        }
        state = next;
    }

    /** Whether `e` or one of its causes says this producer was fenced. */
    private static boolean fenced(Throwable e) {
        for (Throwable t = e; t != null; t = t.getCause()) {
            if (t instanceof ProducerFencedException || t instanceof InvalidProducerEpochException) {
                return true;
            }
        }
        return false;
    }

    /** This prefix's last ledger record (read_committed, partition 0 from its start to its end),
     * or {"state": "none"}. The driver writer of earlier releases wrote {"batch", "fingerprint"}
     * inside its transaction: such a record is a committed batch. */
    private ObjectNode readLedger() {
        Properties p = new Properties();
        p.putAll(consumerConfig());
        ObjectNode last = JSON.createObjectNode();
        last.put("state", "none");
        byte[] key = prefix.getBytes(StandardCharsets.UTF_8);
        TopicPartition tp = new TopicPartition(ledgerTopic, 0);
        long deadline = System.nanoTime() + LEDGER_TIMEOUT.toNanos();
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(p)) {
            consumer.assign(List.of(tp));
            consumer.seekToBeginning(List.of(tp));
            long end = consumer.endOffsets(List.of(tp), LEDGER_TIMEOUT).get(tp);
            while (consumer.position(tp, LEDGER_TIMEOUT) < end) {
                if (System.nanoTime() > deadline) {
                    throw new KafkaException("the batch ledger " + ledgerTopic + " could not be read to its end in "
                            + LEDGER_TIMEOUT.toSeconds() + " s");
                }
                for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(500))) {
                    if (r.value() != null && java.util.Arrays.equals(r.key(), key)) {
                        JsonNode v = JSON.readTree(r.value());
                        if (v instanceof ObjectNode o) {
                            if (!o.has("state")) {
                                o.put("state", "committed");
                            }
                            last = o;
                        }
                    }
                }
            }
        } catch (IOException e) {
            throw new UncheckedIOException("reading the batch ledger " + ledgerTopic, e);
        }
        return last;
    }

    /** The producer's connection settings (bootstrap servers, security), for an Admin client. */
    private Map<String, Object> adminConfig() {
        Map<String, Object> c = new LinkedHashMap<>();
        for (String name : producerConfig.stringPropertyNames()) {
            if (!EosKafkaSink.PRODUCER_ONLY.contains(name)) {
                c.put(name, producerConfig.getProperty(name));
            }
        }
        return c;
    }

    private Map<String, Object> consumerConfig() {
        Map<String, Object> c = adminConfig();
        c.put("isolation.level", "read_committed");
        // The ledger is read once, to its end: a fetch past the last record waits no longer than this
        // (the default fetch.max.wait.ms, 500, cost every driver start half a second).
        c.put("fetch.max.wait.ms", "10");
        c.put("enable.auto.commit", "false");
        c.put("key.deserializer", ByteArrayDeserializer.class.getName());
        c.put("value.deserializer", ByteArrayDeserializer.class.getName());
        return c;
    }

    /** fingerprint(batch), taken from the one beforeTasks computed when that was for this batch. */
    private String fingerprintOf(long batch) {
        Future<String> computed = early;
        early = null;
        if (computed != null && earlyBatch == batch) {
            try {
                String fp = computed.get();
                if (!fp.isEmpty()) {
                    return fp;
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new KafkaException(prefix + ": interrupted while batch " + batch + " was fingerprinted", e);
            } catch (ExecutionException e) { // read again below, its error thrown from there
                LOG.debug("{}: fingerprint of batch {}: {}", prefix, batch, e.getCause().toString());
            }
        }
        return fingerprint(batch);
    }

    /** sha256 (16 hex digits) of {@code <checkpoint>/offsets/<batch>} as Spark wrote it; "" without
     * a checkpoint option or such a file (a batch not planned there). */
    String fingerprint(long batch) {
        if (checkpoint == null || checkpoint.isEmpty()) {
            return "";
        }
        Path path = new Path(new Path(checkpoint, "offsets"), Long.toString(batch));
        try {
            FileSystem fs = path.getFileSystem(SparkContext.getOrCreate().hadoopConfiguration());
            if (!fs.exists(path)) {
                return "";
            }
            MessageDigest sha = MessageDigest.getInstance("SHA-256");
            try (InputStream in = (FSDataInputStream) fs.open(path)) {
                sha.update(in.readAllBytes());
            }
            return HexFormat.of().formatHex(sha.digest()).substring(0, 16);
        } catch (IOException e) {
            throw new UncheckedIOException("reading " + path, e);
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException(e);
        }
    }
}
