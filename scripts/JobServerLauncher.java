import java.lang.reflect.InvocationTargetException;
import java.util.Arrays;

/**
 * Runs a Beam job server's driver (its class name is the first argument, the driver's own
 * arguments follow), telling it to send with each job only the class path entries named by
 * the system property {@code stage.classpath} (none when it is empty).
 *
 * <p>Beam's Flink job server sends its whole class path with every job (for the assembled
 * job server, 163 jars and 157 MB, Flink's own included) to the JobManager, which hands it
 * to each TaskManager, where every job loads Beam's classes anew. {@code scripts/local-cluster}
 * puts the job server's libraries that Flink lacks on the cluster's own class path once, when
 * it starts, so that a job needs to carry none of them. Beam finds what to stage by scanning
 * the {@code java.class.path} property (classgraph), read when each job is submitted; this
 * launcher sets that property and nothing else. Run in Java's source-file mode
 * ({@code java -cp JARS JobServerLauncher.java DRIVER ARGS}): nothing is built or kept.
 */
public final class JobServerLauncher {
  private JobServerLauncher() {}

  public static void main(String[] args) throws Throwable {
    if (args.length == 0) {
      throw new IllegalArgumentException("usage: JobServerLauncher DRIVER_CLASS [ARGS...]");
    }
    System.setProperty("java.class.path", System.getProperty("stage.classpath", ""));
    String[] driverArgs = Arrays.copyOfRange(args, 1, args.length);
    try {
      Class.forName(args[0]).getMethod("main", String[].class).invoke(null, (Object) driverArgs);
    } catch (InvocationTargetException e) {
      throw e.getCause(); // the driver's own failure, not the reflection around it
    }
  }
}
