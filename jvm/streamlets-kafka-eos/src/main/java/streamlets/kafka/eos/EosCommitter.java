package streamlets.kafka.eos;

import java.util.Map;

/**
 * The driver's side of the protocol (pluggable: option "committer" = a class with a public
 * no-argument constructor; default {@link LedgerCommitter}). Spark builds the sink's
 * StreamingWrite for every micro-batch (its V2Writes rule); one committer serves a query's run
 * across them: {@link EosKafkaSink} keeps it per (committer class, transactional.id prefix, the
 * query's id) and opens a new one when it is not
 * {@link #reusable()}. Called by Spark's driver thread, one micro-batch at a time, commit()
 * before Spark writes the batch's commit log.
 */
public interface EosCommitter extends AutoCloseable {
    /** Once, before any task of its first batch runs: roll a recorded decision forward, abort
     * leftovers. */
    void open(Map<String, String> options);

    /** Before each batch's tasks start: roll forward a decision this committer recorded and did
     * not finish; return the batch that is committed already with the offset-log entry Spark
     * holds for it (a replay after a crash between the commit and Spark's commit log would run
     * it again: its tasks write nothing), or -1. */
    long beforeBatch();

    /** Before each batch's tasks start: the number of task partitions (bounds the transactional ids). */
    void beforeTasks(int numPartitions);

    /** Record the decision durably, then commit every task's transaction. */
    void commit(long batchId, TxnCommit[] messages);

    /** The batch failed: abort the transactions of the tasks that reported. */
    void abort(long batchId, TxnCommit[] messages);

    /** Transactional id -> token ({@link TxnCommit#token}) of each transaction of the last batch
     * this committer committed: a task may continue on its executor's producer of that id only
     * when the producer's open transaction is the one named here (TaskProducers). Empty by default
     * (every task starts a new producer). */
    default Map<String, String> committed() {
        return Map.of();
    }

    /** False once a call failed (fenced by a newer driver, Kafka unreachable): the next batch opens
     * a new committer. */
    boolean reusable();

    /** Release the committer's clients. */
    @Override
    void close();
}
