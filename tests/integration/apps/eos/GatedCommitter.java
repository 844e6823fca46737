import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.List;
import java.util.Map;

import streamlets.kafka.eos.LedgerCommitter;
import streamlets.kafka.eos.TxnCommit;

/**
 * Test committer (tests/integration/test_eos_executor_writes.py): halts the driver JVM before
 * the decision if <gate>/crash-before-<batch> exists (a driver crash while the tasks'
 * transactions are open and undecided); after a batch's decision is durable it writes
 * <gate>/<batch>.decided (the tasks' commit messages, one per line), then halts the driver JVM
 * if <gate>/crash-<batch> exists (a crash between decision and commit), else waits while
 * <gate>/hold-<batch> exists. With <gate>/crash-recording-<batch>, it halts the driver JVM after
 * the batch's commits and Spark's commit log, before the ledger's "committed" record. Entering a
 * batch's commit it writes <gate>/<batch>.committing, then waits while <gate>/hold-before-<batch>
 * exists (the tasks' transactions open, undecided).
 */
public class GatedCommitter extends LedgerCommitter {
    private Path gate;
    private Path checkpoint;

    @Override
    public void open(Map<String, String> options) {
        gate = Paths.get(options.get("gate"));
        checkpoint = Paths.get(options.get("checkpoint"));
        super.open(options);
    }

    @Override
    protected void beforeCommittedRecord(long batchId) {
        if (Files.exists(gate.resolve("crash-recording-" + batchId))) {
            try {
                while (!Files.exists(checkpoint.resolve("commits").resolve(Long.toString(batchId)))) {
                    Thread.sleep(20);
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            Runtime.getRuntime().halt(3);
        }
    }

    @Override
    public void commit(long batchId, TxnCommit[] messages) {
        if (Files.exists(gate.resolve("crash-before-" + batchId))) {
            Runtime.getRuntime().halt(3);
        }
        try {
            Files.writeString(gate.resolve(batchId + ".committing"), "");
            while (Files.exists(gate.resolve("hold-before-" + batchId))) {
                Thread.sleep(100);
            }
        } catch (Exception e) {
            throw new RuntimeException(e);
        }
        super.commit(batchId, messages);
    }

    @Override
    protected void decided(long batchId, List<TxnCommit> decision) {
        try {
            StringBuilder text = new StringBuilder();
            for (TxnCommit m : decision) {
                text.append(m.toLine()).append('\n');
            }
            Files.writeString(gate.resolve(batchId + ".decided.tmp"), text);
            Files.move(gate.resolve(batchId + ".decided.tmp"), gate.resolve(batchId + ".decided"),
                    java.nio.file.StandardCopyOption.REPLACE_EXISTING);
            if (Files.exists(gate.resolve("crash-" + batchId))) {
                Runtime.getRuntime().halt(3);
            }
            while (Files.exists(gate.resolve("hold-" + batchId))) {
                Thread.sleep(100);
            }
        } catch (Exception e) {
            throw new RuntimeException(e);
        }
    }
}
