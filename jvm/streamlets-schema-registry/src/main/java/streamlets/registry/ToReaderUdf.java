package streamlets.registry;

import org.apache.spark.sql.api.java.UDF1;

/** Spark UDF (binary to binary): WireFormat.toReader, the inlet's decoding of a registry topic. */
public final class ToReaderUdf implements UDF1<byte[], byte[]> {
  private static final long serialVersionUID = 1L;
  private final WireFormat format;

  public ToReaderUdf(WireFormat format) {
    this.format = format;
  }

  @Override
  public byte[] call(byte[] value) throws Exception {
    return format.toReader(value);
  }
}
