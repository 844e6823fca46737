package streamlets.kafka.eos;

import java.util.Map;
import java.util.TreeMap;

import org.apache.spark.sql.connector.write.WriterCommitMessage;

/**
 * One task's commit message: the Kafka transaction it left open (flushed, not committed) and
 * the records it wrote per Kafka partition. transactionalId is null when the task wrote nothing
 * (no transaction to commit).
 */
public final class TxnCommit implements WriterCommitMessage {
    private static final long serialVersionUID = 1L;
    public final int sparkPartition;
    public final long taskId;
    public final String transactionalId;
    public final long producerId;
    public final short epoch;
    public final TreeMap<Integer, Long> records;
    /** The Spark executor id the task ran on ("driver" in local mode). */
    public final String executor;
    /** The task's transaction's token (random, one per transaction a task begins, an empty one
     * too: TaskProducers), or "-" (a skipped task). */
    public final String token;

    public TxnCommit(int sparkPartition, long taskId, String transactionalId, long producerId, short epoch,
                     Map<Integer, Long> records, String executor, String token) {
        this.sparkPartition = sparkPartition;
        this.taskId = taskId;
        this.transactionalId = transactionalId;
        this.producerId = producerId;
        this.epoch = epoch;
        this.records = new TreeMap<>(records);
        this.executor = executor;
        this.token = token == null ? "-" : token;
    }

    public long total() {
        return records.values().stream().mapToLong(Long::longValue).sum();
    }

    /** One ledger line: "sparkPartition taskId transactionalId producerId epoch p=n,p=n executor token". */
    public String toLine() {
        StringBuilder counts = new StringBuilder();
        for (Map.Entry<Integer, Long> e : records.entrySet()) {
            counts.append(counts.length() == 0 ? "" : ",").append(e.getKey()).append('=').append(e.getValue());
        }
        return sparkPartition + " " + taskId + " " + transactionalId + " " + producerId + " " + epoch + " "
                + (counts.length() == 0 ? "-" : counts) + " " + executor + " " + token;
    }

    public static TxnCommit fromLine(String line) {
        String[] f = line.trim().split(" ");
        TreeMap<Integer, Long> records = new TreeMap<>();
        if (!f[5].equals("-")) {
            for (String kv : f[5].split(",")) {
                String[] p = kv.split("=");
                records.put(Integer.parseInt(p[0]), Long.parseLong(p[1]));
            }
        }
        return new TxnCommit(Integer.parseInt(f[0]), Long.parseLong(f[1]), f[2].equals("null") ? null : f[2],
                Long.parseLong(f[3]), Short.parseShort(f[4]), records, f.length > 6 ? f[6] : "?",
                f.length > 7 ? f[7] : "-");
    }

    @Override
    public String toString() {
        return "TxnCommit(" + toLine() + ")";
    }
}
