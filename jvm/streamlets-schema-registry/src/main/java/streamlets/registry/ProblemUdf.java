package streamlets.registry;

import org.apache.spark.sql.api.java.UDF1;

/** Spark UDF (binary to string): WireFormat.problem, a dead letter's reason on a registry topic. */
public final class ProblemUdf implements UDF1<byte[], String> {
  private static final long serialVersionUID = 1L;
  private final WireFormat format;

  public ProblemUdf(WireFormat format) {
    this.format = format;
  }

  @Override
  public String call(byte[] value) throws Exception {
    return format.problem(value);
  }
}
