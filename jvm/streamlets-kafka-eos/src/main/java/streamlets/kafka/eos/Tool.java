package streamlets.kafka.eos;

import java.nio.charset.StandardCharsets;
import java.util.Properties;
import java.util.TreeMap;

import org.apache.kafka.clients.producer.ProducerRecord;

/**
 * Command line for tests and operations, one transaction step per process:
 *
 * <pre>
 *   begin BOOTSTRAP TOPIC TXID N    write N records (values "TXID-i", partition i % partitions),
 *                                   flush, print "producerId epoch", exit leaving it open
 *   commit BOOTSTRAP TXID PID EPOCH resume the open transaction and commit it
 *   abort BOOTSTRAP TXID PID EPOCH  resume the open transaction and abort it
 *   fence BOOTSTRAP TXID            initTransactions on TXID: fences its producers, aborts
 *                                   its open transaction
 *   ahead BOOTSTRAP TOPIC TXID      begin a transaction and add partition 0 of TOPIC to it with no
 *                                   record (ResumableProducer.addPartitionNow, as the ledger's
 *                                   decision is begun while a batch's tasks run), wait until the
 *                                   coordinator lists it (Admin.describeTransactions), print
 *                                   "STATE topic-0 ...", exit leaving it open
 *   decide BOOTSTRAP LEDGER PREFIX BATCH TXID:PID:EPOCH:P/N[,P/N] ...
 *                                   a driver's LedgerCommitter (transactional.id.prefix PREFIX,
 *                                   ledger topic LEDGER) records its decision to commit those open
 *                                   transactions (the tasks' of Spark partitions 0, 1, ...; N
 *                                   records in Kafka partition P) as batch BATCH, then the JVM
 *                                   halts, before any commit
 *   open BOOTSTRAP LEDGER PREFIX     a new driver's LedgerCommitter opens (rolls a decision forward
 *                                   or writes it off, fences the ids), prints "ok" (and, where it
 *                                   wrote a decision off, why: "ok; ID STATE ..."), closes
 *   loop BOOTSTRAP TOPIC TXID N GAP N transactions of one record each to partition 0 of TOPIC,
 *                                   GAP ms apart (0: back to back), each a send and a
 *                                   commitTransaction (the ledger's record()), by a producer with
 *                                   the sink's settings;
 *                                   prints each one's milliseconds, on one line
 * </pre>
 * Trailing KEY=VALUE arguments are producer settings (e.g. transaction.timeout.ms=5000).
 */
public final class Tool {
    public static void main(String[] args) {
        Properties base = new Properties();
        base.setProperty("bootstrap.servers", args[1]);
        for (String arg : args) { // trailing producer settings: key=value
            if (arg.contains("=")) {
                base.setProperty(arg.substring(0, arg.indexOf('=')), arg.substring(arg.indexOf('=') + 1));
            }
        }
        String cmd = args[0];
        if (cmd.equals("begin")) {
            String topic = args[2];
            String txid = args[3];
            int n = Integer.parseInt(args[4]);
            ResumableProducer p = new ResumableProducer(base, txid);
            p.initTransactions();
            p.beginTransaction();
            int partitions = p.partitionsFor(topic).size();
            TreeMap<Integer, Integer> counts = new TreeMap<>();
            for (int i = 0; i < n; i++) {
                byte[] value = (txid + "-" + i).getBytes(StandardCharsets.UTF_8);
                p.send(new ProducerRecord<>(topic, i % partitions, null, value));
                counts.merge(i % partitions, 1, Integer::sum);
            }
            p.flush();
            System.out.println(p.producerId() + " " + p.epoch() + " " + counts);
            System.out.flush();
            p.closeKeepingTransaction();
            Runtime.getRuntime().halt(0); // no shutdown hooks, like a crash after flush
        }
        if (cmd.equals("ahead")) {
            ahead(base, args[2], args[3]);
            return;
        }
        if (cmd.equals("decide") || cmd.equals("open")) {
            committer(base, args);
            return;
        }
        if (cmd.equals("loop")) {
            loop(base, args[2], args[3], Integer.parseInt(args[4]), Long.parseLong(args[5]));
            return;
        }
        String txid = args[2];
        ResumableProducer p = new ResumableProducer(base, txid);
        if (cmd.equals("fence")) {
            p.initTransactions();
        } else {
            p.resumeTransaction(Long.parseLong(args[3]), Short.parseShort(args[4]));
            if (cmd.equals("commit")) {
                p.commitTransaction();
            } else if (cmd.equals("abort")) {
                p.abortTransaction();
            } else {
                throw new IllegalArgumentException("unknown command " + cmd);
            }
        }
        p.close();
        System.out.println("ok");
    }

    private static void ahead(Properties base, String topic, String txid) {
        ResumableProducer p = new ResumableProducer(base, txid);
        p.initTransactions();
        p.beginTransaction();
        if (!p.addPartitionNow(new org.apache.kafka.common.TopicPartition(topic, 0))) {
            throw new IllegalStateException("this kafka-clients cannot add a partition ahead");
        }
        Properties admin = new Properties();
        admin.setProperty("bootstrap.servers", base.getProperty("bootstrap.servers"));
        try (org.apache.kafka.clients.admin.Admin a = org.apache.kafka.clients.admin.Admin.create(admin)) {
            long deadline = System.nanoTime() + 30_000_000_000L;
            while (true) {
                org.apache.kafka.clients.admin.TransactionDescription d =
                        a.describeTransactions(java.util.List.of(txid)).description(txid).get();
                if (!d.topicPartitions().isEmpty() || System.nanoTime() > deadline) {
                    StringBuilder out = new StringBuilder(d.state().toString());
                    d.topicPartitions().forEach(tp -> out.append(' ').append(tp));
                    System.out.println(out);
                    break;
                }
                Thread.sleep(50);
            }
        } catch (InterruptedException | java.util.concurrent.ExecutionException e) {
            throw new IllegalStateException(e);
        }
        System.out.flush();
        p.closeKeepingTransaction();
        Runtime.getRuntime().halt(0); // the transaction stays open, as a driver's while its tasks run
    }

    /** The sink's options carrying the producer settings `base` (each as kafka.<setting>). */
    private static java.util.Map<String, String> sinkOptions(Properties base) {
        java.util.Map<String, String> options = new java.util.HashMap<>();
        base.forEach((k, v) -> options.put("kafka." + k, (String) v));
        return options;
    }

    /** decide / open: a driver's LedgerCommitter, as the sink opens it (its options). */
    private static void committer(Properties base, String[] args) {
        java.util.Map<String, String> options = sinkOptions(base);
        options.put("ledger.topic", args[2]);
        options.put("transactional.id.prefix", args[3]);
        if (args[0].equals("open")) {
            LedgerCommitter committer = new LedgerCommitter();
            committer.open(options);
            committer.close();
            System.out.println(committer.writtenOff == null ? "ok" : "ok; " + committer.writtenOff);
            return;
        }
        java.util.List<TxnCommit> messages = new java.util.ArrayList<>();
        for (int i = 5; i < args.length && !args[i].contains("="); i++) {
            String[] f = args[i].split(":");
            java.util.Map<Integer, Long> records = new TreeMap<>();
            for (String kv : f[3].split(",")) {
                records.put(Integer.parseInt(kv.split("/")[0]), Long.parseLong(kv.split("/")[1]));
            }
            messages.add(new TxnCommit(messages.size(), messages.size(), f[0], Long.parseLong(f[1]),
                    Short.parseShort(f[2]), records, "tool", "t" + messages.size()));
        }
        LedgerCommitter committer = new LedgerCommitter() {
            @Override
            protected void decided(long batchId, java.util.List<TxnCommit> decision) {
                System.out.println("decided");
                System.out.flush();
                Runtime.getRuntime().halt(0); // a driver that dies between its decision and the commits
            }
        };
        committer.open(options);
        committer.beforeTasks(messages.size());
        committer.commit(Long.parseLong(args[4]), messages.toArray(new TxnCommit[0]));
        throw new IllegalStateException("the decision was not recorded");
    }

    /** The sink's task and ledger producer settings (EosKafkaSink.producerConfig), `base` over them. */
    private static void loop(Properties base, String topic, String txid, int n, long gapMs) {
        ResumableProducer p = new ResumableProducer(EosKafkaSink.producerConfig(sinkOptions(base)), txid);
        p.initTransactions();
        StringBuilder out = new StringBuilder();
        try {
            for (int i = 0; i < n; i++) {
                long start = System.nanoTime();
                p.beginTransaction();
                p.send(new ProducerRecord<>(topic, 0, null, new byte[100])); // the commit sends it (no linger)
                p.commitTransaction();
                out.append(String.format(java.util.Locale.ROOT, "%.3f ", (System.nanoTime() - start) / 1e6));
                if (gapMs > 0) {
                    Thread.sleep(gapMs);
                }
            }
        } catch (InterruptedException e) {
            throw new IllegalStateException(e);
        } finally {
            p.close();
        }
        System.out.println(out.toString().trim());
    }
}
