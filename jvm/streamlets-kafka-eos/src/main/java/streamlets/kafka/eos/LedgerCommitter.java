package streamlets.kafka.eos;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.stream.Stream;

import org.apache.kafka.common.errors.InvalidProducerEpochException;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.apache.kafka.common.KafkaException;

/**
 * The default driver committer: a ledger folder (option "ledger", local; keep it in the query's
 * checkpoint so a fresh checkpoint starts a fresh ledger) with
 * <ul>
 *   <li>{@code <batch>.decision}: the tasks' transactions, written (fsync, atomic rename) BEFORE
 *       any is committed: the commit decision;</li>
 *   <li>{@code <batch>.committed}: every transaction of that decision committed;</li>
 *   <li>{@code <batch>.aborted}: the broker had aborted all of them (transaction timeout): the
 *       batch is written again;</li>
 *   <li>{@code ids}: how many transactional ids (prefix-0 .. prefix-(n-1)) were ever used.</li>
 * </ul>
 * open(): a decision without an outcome is rolled forward (resume + commit each; a commit already
 * done is accepted again), then every id ever used is fenced by initTransactions, which aborts
 * leftovers (transactions of tasks whose batch had no decision).
 */
public class LedgerCommitter implements EosCommitter {
    private Path dir;
    private Properties producerConfig;
    private String prefix;
    private long lastCommitted = -1;

    @Override
    public void open(Map<String, String> options) {
        dir = Paths.get(EosKafkaSink.required(options, "ledger"));
        producerConfig = EosKafkaSink.producerConfig(options);
        prefix = EosKafkaSink.required(options, "transactional.id.prefix");
        try {
            Files.createDirectories(dir);
            List<Long> pending = new ArrayList<>();
            try (Stream<Path> files = Files.list(dir)) {
                for (Path f : (Iterable<Path>) files::iterator) {
                    String name = f.getFileName().toString();
                    if (name.endsWith(".committed")) {
                        lastCommitted = Math.max(lastCommitted, Long.parseLong(name.substring(0, name.indexOf('.'))));
                    } else if (name.endsWith(".decision")) {
                        pending.add(Long.parseLong(name.substring(0, name.indexOf('.'))));
                    }
                }
            }
            pending.sort(null);
            for (long batch : pending) {
                if (!Files.exists(outcome(batch, "committed")) && !Files.exists(outcome(batch, "aborted"))) {
                    List<TxnCommit> decision = new ArrayList<>();
                    for (String line : Files.readAllLines(outcome(batch, "decision"))) {
                        decision.add(TxnCommit.fromLine(line));
                    }
                    System.err.println("streamlets-kafka-eos: rolling forward batch " + batch + " (" + decision.size() + " transactions)");
                    commitAll(batch, decision);
                }
            }
            int ids = idsUsed();
            for (int i = 0; i < ids; i++) { // abort leftovers: initTransactions fences and aborts
                try (ResumableProducer p = new ResumableProducer(producerConfig, prefix + "-" + i)) {
                    p.initTransactions();
                }
            }
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    @Override
    public long lastCommitted() {
        return lastCommitted;
    }

    @Override
    public void beforeTasks(int numPartitions) {
        if (numPartitions > idsUsed()) {
            write(dir.resolve("ids"), Integer.toString(numPartitions));
        }
    }

    @Override
    public void commit(long batchId, TxnCommit[] messages) {
        if (batchId <= lastCommitted) {
            return; // a replay of a committed batch: its tasks wrote nothing
        }
        List<TxnCommit> decision = new ArrayList<>();
        StringBuilder text = new StringBuilder();
        for (TxnCommit m : messages) {
            if (m != null && m.transactionalId != null) {
                decision.add(m);
                text.append(m.toLine()).append('\n');
            }
        }
        try { // a batch the broker aborted before is being written again: a new decision
            Files.deleteIfExists(outcome(batchId, "aborted"));
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        write(outcome(batchId, "decision"), text.toString()); // the decision, durable first
        decided(batchId, decision);
        commitAll(batchId, decision);
    }

    /** Called after the decision is durable, before any transaction is committed (tests hook in here). */
    protected void decided(long batchId, List<TxnCommit> decision) {
    }

    private void commitAll(long batchId, List<TxnCommit> decision) {
        List<String> fenced = new ArrayList<>();
        for (TxnCommit m : decision) {
            try (ResumableProducer p = new ResumableProducer(producerConfig, m.transactionalId)) {
                p.resumeTransaction(m.producerId, m.epoch);
                p.commitTransaction();
                System.err.println("streamlets-kafka-eos: batch " + batchId + " committed " + m);
            } catch (ProducerFencedException | InvalidProducerEpochException e) {
                System.err.println("streamlets-kafka-eos: batch " + batchId + " fenced " + m + ": " + e);
                fenced.add(m.transactionalId);
            }
        }
        if (!fenced.isEmpty() && fenced.size() == decision.size()) {
            write(outcome(batchId, "aborted"), String.join("\n", fenced));
            throw new KafkaException("batch " + batchId + ": the broker aborted all its transactions "
                    + "(transaction.timeout.ms passed before the commit); the batch is written again on restart");
        }
        if (!fenced.isEmpty()) {
            throw new KafkaException("batch " + batchId + " partly committed: the broker aborted transactions "
                    + fenced + " (transaction.timeout.ms passed before the commit); their records are lost");
        }
        write(outcome(batchId, "committed"), "");
        lastCommitted = Math.max(lastCommitted, batchId);
    }

    @Override
    public void abort(long batchId, TxnCommit[] messages) {
        for (TxnCommit m : messages) {
            if (m == null || m.transactionalId == null) {
                continue;
            }
            try (ResumableProducer p = new ResumableProducer(producerConfig, m.transactionalId)) {
                p.resumeTransaction(m.producerId, m.epoch);
                p.abortTransaction();
            } catch (KafkaException e) { // fenced already: a later initTransactions aborted it
                System.err.println("streamlets-kafka-eos: abort " + m.transactionalId + ": " + e);
            }
        }
    }

    private int idsUsed() {
        Path ids = dir.resolve("ids");
        try {
            return Files.exists(ids) ? Integer.parseInt(Files.readString(ids).trim()) : 0;
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    private Path outcome(long batchId, String kind) {
        return dir.resolve(batchId + "." + kind);
    }

    /** Write a file durably: a temporary file, fsync, atomic rename, fsync of the folder. */
    private void write(Path target, String text) {
        Path tmp = target.resolveSibling(target.getFileName() + ".tmp");
        try {
            Files.write(tmp, text.getBytes(StandardCharsets.UTF_8));
            try (FileChannel c = FileChannel.open(tmp, StandardOpenOption.WRITE)) {
                c.force(true);
            }
            Files.move(tmp, target, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
            try (FileChannel d = FileChannel.open(dir, StandardOpenOption.READ)) {
                d.force(true);
            } catch (IOException ignored) { // some file systems cannot sync a folder
            }
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }
}
